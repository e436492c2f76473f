// SPDX-License-Identifier: GPL-2.0-only
//! From scx_utils::Topology (or a synthetic description, for tests) to the
//! BPF side's `struct sis_topo`: dense LLC indices, each LLC's CPUs in id order
//! (for for_each_cpu_wrap), SMT siblings, and the steal order between LLCs.

use anyhow::{bail, Result};
use std::collections::BTreeMap;

use crate::bpf_intf::{self, sis_topo};

const MAX_CPUS: usize = bpf_intf::sis_consts_MAX_CPUS as usize;
const MAX_LLCS: usize = bpf_intf::sis_consts_MAX_LLCS as usize;
const MAX_SMT: usize = bpf_intf::sis_consts_MAX_SMT as usize;

/// One present CPU: its id, the kernel's LLC and core ids, its NUMA node.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuDesc {
    pub id: usize,
    pub llc: usize,
    pub core: usize,
    pub node: usize,
}

/// The shape the scheduler needs; ids may have holes.
#[derive(Clone, Debug)]
pub struct TopoDesc {
    pub cpus: Vec<CpuDesc>,
}

impl TopoDesc {
    pub fn from_scx(t: &scx_utils::Topology) -> Self {
        let cpus = t
            .all_cpus
            .values()
            .map(|c| CpuDesc {
                id: c.id,
                llc: c.llc_id,
                // core ids repeat across packages: make them unique per LLC
                core: c.llc_id * 1_000_000 + c.core_id,
                node: c.node_id,
            })
            .collect();
        TopoDesc { cpus }
    }

    /// A regular synthetic machine: `nr_llcs` × `cores` × `threads`, CPU ids
    /// numbered thread-major within a core, LLCs split over `nodes`.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn synthetic(nr_llcs: usize, cores: usize, threads: usize, nodes: usize) -> Self {
        // the product checked before anything is allocated: callers bound each factor
        // (placement-cost's --topologies, shadow's tests), and a product past MAX_CPUS or
        // one that wraps is their bug, not a machine
        let nr = Self::synthetic_cpus(nr_llcs, cores, threads);
        assert!(
            nr.is_some(),
            "synthetic topology {nr_llcs}x{cores}x{threads}: more than {} CPUs",
            bpf_intf::sis_consts_MAX_CPUS
        );
        let mut cpus = Vec::with_capacity(nr.unwrap_or(0));
        for l in 0..nr_llcs {
            for c in 0..cores {
                for t in 0..threads {
                    cpus.push(CpuDesc {
                        id: (l * cores + c) * threads + t,
                        llc: l,
                        core: l * cores + c,
                        node: l * nodes.max(1) / nr_llcs.max(1),
                    });
                }
            }
        }
        TopoDesc { cpus }
    }

    /// CPUs of a synthetic `nr_llcs` × `cores` × `threads` machine: None when the product
    /// wraps or passes MAX_CPUS.
    pub fn synthetic_cpus(nr_llcs: usize, cores: usize, threads: usize) -> Option<usize> {
        nr_llcs
            .checked_mul(cores)?
            .checked_mul(threads)
            .filter(|&n| n <= bpf_intf::sis_consts_MAX_CPUS as usize)
    }

    /// LLC index (dense, in order of the kernel's LLC ids) → its CPUs, ascending.
    pub fn llcs(&self) -> Vec<Vec<usize>> {
        let mut by: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for c in &self.cpus {
            by.entry(c.llc).or_default().push(c.id);
        }
        by.into_values()
            .map(|mut v| {
                v.sort_unstable();
                v
            })
            .collect()
    }

    pub fn nr_cpu_ids(&self) -> usize {
        self.cpus.iter().map(|c| c.id + 1).max().unwrap_or(0)
    }

    /// Build the BPF topology. Errors on sizes over the compiled limits.
    pub fn build(&self) -> Result<Box<sis_topo>> {
        let llcs = self.llcs();
        if self.cpus.is_empty() {
            bail!("no CPUs in the topology");
        }
        if self.nr_cpu_ids() > MAX_CPUS {
            bail!(
                "{} CPU ids, at most {MAX_CPUS} supported",
                self.nr_cpu_ids()
            );
        }
        if llcs.len() > MAX_LLCS {
            bail!("{} LLCs, at most {MAX_LLCS} supported", llcs.len());
        }
        // SAFETY: sis_topo is plain integers; all-zero is a valid value
        let mut t: Box<sis_topo> = Box::new(unsafe { std::mem::zeroed() });
        t.nr_cpu_ids = self.nr_cpu_ids() as u32;
        t.nr_llcs = llcs.len() as u32;
        t.cpu_llc.iter_mut().for_each(|v| *v = -1);

        let mut pos = 0usize;
        for (l, cpus) in llcs.iter().enumerate() {
            t.llc_start[l] = pos as u16;
            t.llc_nr[l] = cpus.len() as u16;
            for (i, &cpu) in cpus.iter().enumerate() {
                t.llc_cpus[pos] = cpu as u16;
                t.cpu_llc[cpu] = l as i16;
                t.cpu_llc_pos[cpu] = i as u16;
                pos += 1;
            }
        }

        let mut cores: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for c in &self.cpus {
            cores.entry(c.core).or_default().push(c.id);
        }
        for sibs in cores.values_mut() {
            sibs.sort_unstable();
            if sibs.len() > MAX_SMT {
                bail!(
                    "{} threads per core, at most {MAX_SMT} supported",
                    sibs.len()
                );
            }
            if sibs.len() > 1 {
                t.smt = 1;
            }
            for &cpu in sibs.iter() {
                t.cpu_nr_smt[cpu] = sibs.len() as u16;
                for (i, &s) in sibs.iter().enumerate() {
                    t.cpu_smt[cpu][i] = s as u16;
                }
            }
        }

        // steal order: same node first, then by LLC index distance
        let node_of: Vec<usize> = llcs
            .iter()
            .map(|cpus| {
                self.cpus
                    .iter()
                    .find(|c| c.id == cpus[0])
                    .map_or(0, |c| c.node)
            })
            .collect();
        for l in 0..llcs.len() {
            let mut others: Vec<usize> = (0..llcs.len()).filter(|&o| o != l).collect();
            others.sort_by_key(|&o| (node_of[o] != node_of[l], o.abs_diff(l), o));
            for (k, o) in others.into_iter().enumerate() {
                t.llc_steal[l][k] = o as u8;
            }
        }
        Ok(t)
    }
}

/// Copy a bindgen struct into the skeleton's struct of the same C type.
///
/// # Safety
/// `T` and `U` must be the same C struct (both generated from intf.h).
pub unsafe fn copy_same_c_type<T, U>(src: &T, dst: &mut U) {
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<U>());
    unsafe {
        std::ptr::copy_nonoverlapping(
            src as *const T as *const u8,
            dst as *mut U as *mut u8,
            std::mem::size_of::<T>(),
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The synthetic machine's product is checked, not wrapped: 2^32 CPUs in u32 was 0.
    #[test]
    fn synthetic_product_checked() {
        assert_eq!(TopoDesc::synthetic_cpus(64, 8, 1), Some(512));
        assert_eq!(TopoDesc::synthetic_cpus(64, 8, 2), None);
        assert_eq!(TopoDesc::synthetic_cpus(2, usize::MAX / 2 + 1, 1), None);
        assert_eq!(TopoDesc::synthetic_cpus(64, 1 << 26, 1), None);
    }

    #[test]
    fn two_llcs_with_smt() {
        let t = TopoDesc::synthetic(2, 2, 2, 1).build().unwrap();
        assert_eq!(t.nr_llcs, 2);
        assert_eq!(t.smt, 1);
        assert_eq!(&t.llc_cpus[..8], &[0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(t.cpu_llc[5], 1);
        assert_eq!(t.cpu_llc_pos[5], 1);
        assert_eq!(t.cpu_nr_smt[2], 2);
        assert_eq!(&t.cpu_smt[3][..2], &[2, 3]);
        assert_eq!(t.llc_steal[0][0], 1);
    }

    #[test]
    fn holes_and_unordered_ids() {
        // CPUs 0,2 in LLC 7; 5,9 in LLC 3; CPU 1,3,4.. absent
        let d = TopoDesc {
            cpus: vec![
                CpuDesc {
                    id: 9,
                    llc: 3,
                    core: 9,
                    node: 0,
                },
                CpuDesc {
                    id: 2,
                    llc: 7,
                    core: 2,
                    node: 0,
                },
                CpuDesc {
                    id: 0,
                    llc: 7,
                    core: 0,
                    node: 0,
                },
                CpuDesc {
                    id: 5,
                    llc: 3,
                    core: 5,
                    node: 0,
                },
            ],
        };
        let t = d.build().unwrap();
        assert_eq!(t.nr_cpu_ids, 10);
        assert_eq!(t.nr_llcs, 2);
        assert_eq!(t.smt, 0);
        // LLC id 3 sorts first
        assert_eq!(&t.llc_cpus[..4], &[5, 9, 0, 2]);
        assert_eq!(t.cpu_llc[1], -1);
        assert_eq!(t.cpu_llc[0], 1);
        assert_eq!(t.cpu_llc_pos[2], 1);
    }

    #[test]
    fn numa_steal_order_prefers_same_node() {
        let t = TopoDesc::synthetic(4, 2, 1, 2).build().unwrap();
        // LLCs 0,1 on node 0; 2,3 on node 1
        assert_eq!(&t.llc_steal[0][..3], &[1, 2, 3]);
        assert_eq!(&t.llc_steal[2][..3], &[3, 1, 0]);
    }

    #[test]
    fn limits() {
        assert!(TopoDesc::synthetic(65, 1, 1, 1).build().is_err());
        assert!(TopoDesc::synthetic(1, 1, 5, 1).build().is_err());
        assert!(TopoDesc { cpus: vec![] }.build().is_err());
    }
}
