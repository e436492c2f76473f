// SPDX-License-Identifier: GPL-2.0-only
//! Host BPF tests of the wake-up path (src/bpf/sis_test.bpf.c), see sis_model.rs.
