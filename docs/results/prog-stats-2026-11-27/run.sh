#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# The host side of this record: one boot of Debian's 7.3.4 kernel (tools/vm's default 8
# CPUs: 2 LLCs of 4, SMT pairs) running guest.sh; output in guest.out.
cd "$(dirname "$0")/../../.." || exit 2
here=docs/results/prog-stats-2026-11-27
nice -n 10 tools/vm --no-build --timeout 1800 --bin "$here/guest.sh" -- 'guest.sh' > "$here/guest.out" 2>&1
