#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# The second boot of this record: guest-text.sh (the printed table); output in guest-text.out.
cd "$(dirname "$0")/../../.." || exit 2
here=docs/results/prog-stats-2026-11-27
nice -n 10 tools/vm --no-build --timeout 1200 --bin "$here/guest-text.sh" -- 'guest-text.sh' > "$here/guest-text.out" 2>&1
