// SPDX-License-Identifier: GPL-2.0-only
//! The host test object's arguments: src/bpf/testing/test_intf.h, bindgen'd by build.rs
//! (as src/bpf_intf.rs is intf.h, src/tools/tool_intf.rs the tools' tool_intf.h).
#![allow(non_upper_case_globals)]
#![allow(non_camel_case_types)]
#![allow(non_snake_case)]
#![allow(dead_code)]

include!(concat!(env!("OUT_DIR"), "/test_intf.rs"));
