// SPDX-License-Identifier: GPL-2.0-only
//! The shipped tools' numbers shared with their BPF halves: src/bpf/tools/tool_intf.h,
//! bindgen'd by build.rs (as src/bpf_intf.rs is intf.h).
#![allow(non_upper_case_globals)]
#![allow(non_camel_case_types)]
#![allow(non_snake_case)]
#![allow(dead_code)]

include!(concat!(env!("OUT_DIR"), "/tool_intf.rs"));
