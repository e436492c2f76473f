// SPDX-License-Identifier: GPL-2.0-only
//! `shadow --record FILE` and `shadow --replay FILE...`: the kernel's decisions kept as a
//! file, and replayed through the same BPF replay object as the live command
//! (shadow_replay.bpf.c, BPF_PROG_TEST_RUN: no tracing, no sched_ext).
//!
//! The format, `scx_sisutil-shadow` version 1, is JSON Lines (README, "Recordings"): a
//! header line (the format's name and version, host, kernel release, attachment, the port's
//! features for the kernel, HZ, the topology as one object per CPU, what the recording lost)
//! and one object per wake-up, shadow.bpf.c's `struct shadow_rec` field for field with its
//! CPU masks as lists of CPU ids. JSON Lines because every tool reads it (jq, DuckDB's
//! read_json, pandas) and serde_json is already here; Parquet's crates would double the
//! build on this project's 2 cores for a file that `zstd` shrinks ~10x as well.
//! Process names only with `--comm`.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use libbpf_rs::OpenObject;

use super::depth::{print_depth, Busy, DepthAcc, Timeline};
use super::{
    analyse_with, mutate_scan_start, pct, print_table, report_policies, Analysis, PolicyRow, Rec,
    Recording, Replay, Report, ReportOpts, ShadowOpts, SyncCheck,
};
use crate::sched::features;
use crate::sched::sis_fit::FitRow;
use crate::sched::stats::add_fields;
use crate::sched::topology::{CpuDesc, TopoDesc};

/// The format's name and the one version this build reads and writes.
pub const FORMAT: &str = "scx_sisutil-shadow";
pub const VERSION: u32 = 1;
/// Bytes of record lines per chunk, the unit a replay worker parses and replays (with the
/// queue of chunks, the memory bound of a replay: about 8 chunks).
const CHUNK_BYTES: usize = 8 << 20;

/// The header line.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Header {
    pub format: String,
    pub version: u32,
    /// the program that wrote it
    pub recorded_by: String,
    pub host: String,
    /// the kernel's release (uname -r)
    pub kernel: String,
    /// fentry, kprobe or tracepoint
    pub attach: String,
    /// the port's features the kernel's map to (the replay's feature word)
    pub features: Vec<String>,
    pub features_source: String,
    /// the kernel's HZ (from the records' clock; 250 when too short to tell)
    pub hz: u64,
    pub duration_s: f64,
    /// record lines that follow
    pub records: u64,
    /// WF_TTWU wake-ups seen (records + not_kept)
    pub wakeups: u64,
    /// lost in the per-CPU rings
    pub dropped: u64,
    /// over the recorder's memory bound: counted, not written
    pub not_kept: u64,
    pub not_recorded: BTreeMap<String, u64>,
    /// fentry, kprobe: WF_SYNC from the call stack against wake_flags [agree, differ]
    pub sync_from_stack: Option<[u64; 2]>,
    /// the records carry waker_comm and wakee_comm
    pub comm: bool,
    /// one object per present CPU: id, LLC id, core id (unique), NUMA node
    pub topology: Vec<CpuLine>,
    /// the CPUs' idle time at the loader's cadence, for the depth block (shadow_depth.rs);
    /// absent from files recorded before it (their replay has no depth block)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<Busy>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct CpuLine {
    pub cpu: usize,
    pub llc: usize,
    pub core: usize,
    pub node: usize,
}

fn cpus_of(mask: &[u64; 8]) -> Vec<u32> {
    let mut v = vec![];
    for (w, &bits) in mask.iter().enumerate() {
        let mut b = bits;
        while b != 0 {
            v.push(w as u32 * 64 + b.trailing_zeros());
            b &= b - 1;
        }
    }
    v
}

/// A record's CPU mask: written as the list of its CPU ids, read straight into its words
/// (no list in between).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mask(pub [u64; 8]);

impl Serialize for Mask {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(cpus_of(&self.0))
    }
}

impl<'de> Deserialize<'de> for Mask {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Mask, D::Error> {
        struct CpuList;
        impl<'de> serde::de::Visitor<'de> for CpuList {
            type Value = Mask;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of CPU ids")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<Mask, A::Error> {
                let mut m = [0u64; 8];
                while let Some(c) = seq.next_element::<u32>()? {
                    if c >= 512 {
                        return Err(serde::de::Error::custom(format!("CPU {c} over 511")));
                    }
                    m[c as usize / 64] |= 1 << (c % 64);
                }
                Ok(Mask(m))
            }
        }
        d.deserialize_seq(CpuList)
    }
}

fn comm_of(c: &[i8; 16]) -> String {
    let bytes: Vec<u8> = c
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn comm_to(s: &str) -> [i8; 16] {
    let mut c = [0i8; 16];
    for (d, b) in c.iter_mut().zip(s.bytes().take(15)) {
        *d = b as i8;
    }
    c
}

/// A record's `util_avg_sum` where the file has none (recorded before the field).
pub const UTIL_AVG_UNKNOWN: [u64; 2] = [u64::MAX; 2];

/// wake_affine()'s inputs re-read at exit (shadow.bpf.c's read_wa_exit(), for the race
/// test): optional in version 1, absent from files recorded before them (then the race test
/// reads the idle states and hints only, as it did).
#[derive(Serialize, Deserialize, Debug)]
pub struct WaExit {
    pub this_nr_running: u32,
    pub this_nr_delayed: u32,
    pub this_load: u64,
    pub prev_load: u64,
    pub waker_load: u64,
    pub wakee_load: u64,
    /// shadow_rec.wa_active: bit 0 this_rq, bit 1 prev's, worked on between entry and exit
    /// (optional: absent, 0, from files recorded before it)
    #[serde(default, skip_serializing_if = "is_zero")]
    pub active: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// RecLine: `struct shadow_rec` as a JSON object; the masks as CPU lists. Read typed (no
/// JSON value in between); fields it does not know are skipped (a later writer's optional
/// fields, README "Recordings and a fleet").
macro_rules! rec_line {
    (scalars: $($s:ident: $st:ty),* ; pairs: $($p:ident: $pt:ty),* ; masks: $($m:ident),*) => {
        #[derive(Serialize, Deserialize, Debug)]
        pub struct RecLine {
            $(pub $s: $st,)*
            $(pub $p: [$pt; 2],)*
            $(pub $m: Mask,)*
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub waker_comm: Option<String>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub wakee_comm: Option<String>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub wa_exit: Option<WaExit>,
            /// vcpu_is_preempted() of the CPUs read (optional in version 1: absent where it
            /// was not read, no steal_time in the kernel's BTF, or recorded before it)
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub vcpu_preempted: Option<Mask>,
            /// the LLCs' sums of util_avg alone (optional in version 1: absent from files
            /// recorded before it; then UTIL_AVG_UNKNOWN)
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub util_avg_sum: Option<[u64; 2]>,
        }

        fn to_line(r: &Rec, comm: bool) -> RecLine {
            RecLine {
                $($s: r.$s,)*
                $($p: r.$p,)*
                $($m: Mask(r.$m),)*
                waker_comm: comm.then(|| comm_of(&r.waker_comm)),
                wakee_comm: comm.then(|| comm_of(&r.wakee_comm)),
                util_avg_sum: (r.util_avg_sum != UTIL_AVG_UNKNOWN).then_some(r.util_avg_sum),
                vcpu_preempted: (r.vcpu_read != 0).then_some(Mask(r.vcpu_preempted)),
                wa_exit: (r.wa_exit_read != 0).then(|| WaExit {
                    this_nr_running: r.this_nr_running_exit,
                    this_nr_delayed: r.this_nr_delayed_exit,
                    this_load: r.this_load_exit,
                    prev_load: r.prev_load_exit,
                    waker_load: r.waker_load_exit,
                    wakee_load: r.wakee_load_exit,
                    active: r.wa_active,
                }),
            }
        }

        fn from_line(l: &RecLine) -> Rec {
            let mut r = Rec::default();
            $(r.$s = l.$s;)*
            $(r.$p = l.$p;)*
            $(r.$m = l.$m.0;)*
            if let Some(c) = &l.waker_comm {
                r.waker_comm = comm_to(c);
            }
            if let Some(c) = &l.wakee_comm {
                r.wakee_comm = comm_to(c);
            }
            r.util_avg_sum = l.util_avg_sum.unwrap_or(UTIL_AVG_UNKNOWN);
            if let Some(m) = &l.vcpu_preempted {
                r.vcpu_read = 1;
                r.vcpu_preempted = m.0;
            }
            if let Some(w) = &l.wa_exit {
                r.wa_exit_read = 1;
                r.this_nr_running_exit = w.this_nr_running;
                r.this_nr_delayed_exit = w.this_nr_delayed;
                r.this_load_exit = w.this_load;
                r.prev_load_exit = w.prev_load;
                r.waker_load_exit = w.waker_load;
                r.wakee_load_exit = w.wakee_load;
                r.wa_active = w.active;
            }
            r
        }
    };
}

rec_line! {
    scalars: jiffies: u64, ns: u64, this_cpu: i32, prev: i32, chosen: i32, wake_flags: u32,
        recent_used_cpu: i32, pcpu_kthread: u32, sync: u32, last_wakee_is_p: u32,
        waker_flips: u32, wakee_flips: u32, waker_decay_ts: u64, waker_flips_exit: u32,
        this_nr_running: u32, waker_decay_ts_exit: u64, this_load: u64, prev_load: u64,
        waker_load: u64, wakee_load: u64, this_cap: u64, prev_cap: u64, avg_idle: u64,
        unknown: u32, on_cpu: u32, this_nr_delayed: u32, stack_sync: i32, preempt_count: u32,
        pc_layout: u32;
    pairs: has_idle_cores: i32, nr_idle_scan: i32, has_idle_cores_exit: i32,
        nr_idle_scan_exit: i32, util_sum: u64;
    masks: avail_idle, sched_idle, idle_exit, read, allowed
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// A --record file, created before the recording (a bad path fails before anything is traced).
pub struct Out {
    path: PathBuf,
    file: File,
}

impl Out {
    pub fn create(path: &Path) -> Result<Out> {
        let file = File::create(path)
            .with_context(|| format!("--record {}: cannot create it", path.display()))?;
        Ok(Out {
            path: path.to_path_buf(),
            file,
        })
    }

    /// The header from the live report, then each record.
    pub fn write(
        self,
        rep: &Report,
        topo: &TopoDesc,
        feat: u64,
        rec: &Recording,
        comm: bool,
    ) -> Result<()> {
        let recs = rec.recs.as_slice();
        let h = Header {
            format: FORMAT.into(),
            version: VERSION,
            recorded_by: format!("scx_sisutil {}", env!("CARGO_PKG_VERSION")),
            host: hostname(),
            kernel: rep.kernel.clone(),
            attach: rep.attach.clone(),
            features: features::names_on(feat)
                .into_iter()
                .map(String::from)
                .collect(),
            features_source: rep.features_source.clone(),
            hz: rep.hz,
            duration_s: rep.duration_s,
            records: recs.len() as u64,
            wakeups: rep.wakeups,
            dropped: rep.dropped,
            not_kept: rep.not_kept,
            not_recorded: rep.not_recorded.clone(),
            sync_from_stack: rep.sync_from_stack.as_ref().map(|s| [s.agree, s.differ]),
            comm,
            topology: topo
                .cpus
                .iter()
                .map(|c| CpuLine {
                    cpu: c.id,
                    llc: c.llc,
                    core: c.core,
                    node: c.node,
                })
                .collect(),
            busy: Some(rec.busy.clone()),
        };
        let ctx = || format!("--record {}: writing", self.path.display());
        let (out, zstd) = sink(&self.path, self.file)?;
        let mut w = BufWriter::with_capacity(1 << 20, out);
        serde_json::to_writer(&mut w, &h).with_context(ctx)?;
        w.write_all(b"\n").with_context(ctx)?;
        for r in recs {
            serde_json::to_writer(&mut w, &to_line(r, comm)).with_context(ctx)?;
            w.write_all(b"\n").with_context(ctx)?;
        }
        w.flush().with_context(ctx)?;
        drop(w);
        if let Some(mut c) = zstd {
            let st = c.wait().with_context(ctx)?;
            if !st.success() {
                bail!("--record {}: zstd failed ({st})", self.path.display());
            }
        }
        eprintln!(
            "shadow: recorded {} wake-ups to {}",
            recs.len(),
            self.path.display()
        );
        Ok(())
    }
}

/// Where a --record file's lines go: `file`, or for a `.zst` name `zstd -c` writing into it
/// (as --replay reads it back), with its process to wait for.
fn sink(path: &Path, file: File) -> Result<(Box<dyn Write>, Option<Child>)> {
    if path.extension().is_none_or(|e| e != "zst") {
        return Ok((Box::new(file), None));
    }
    let mut child = Command::new("zstd")
        .args(["-qc"])
        .stdin(Stdio::piped())
        .stdout(Stdio::from(file))
        .spawn()
        .with_context(|| format!("--record {}: a .zst needs the zstd command", path.display()))?;
    let stdin = child.stdin.take().context("zstd's stdin")?;
    Ok((Box::new(stdin), Some(child)))
}

/// A recording being read: its header, then its records line by line.
pub struct Reader {
    path: PathBuf,
    lines: Box<dyn BufRead>,
    child: Option<Child>,
    line_no: u64,
    buf: String,
    /// the start of a line raw_chunk() read but did not return
    tail: Vec<u8>,
    /// raw_chunk() read to the end of the file
    ended: bool,
    pub header: Header,
}

/// `fd`'s pipe made 1 MiB, not 64 KiB: 16 times fewer wake-ups of the two processes (best
/// effort: the default size works too).
fn grow_pipe(fd: &impl std::os::fd::AsRawFd) {
    // SAFETY: fcntl on a pipe this process owns
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
}

impl Reader {
    /// Open `path` (`.zst`: through `zstd -dc`) and read its header; a file of another
    /// format or version is refused in one line.
    pub fn open(path: &Path) -> Result<Reader> {
        let name = path.display();
        let (lines, child): (Box<dyn BufRead>, _) = if path.extension().is_some_and(|e| e == "zst")
        {
            if !path.is_file() {
                bail!("{name}: no such file");
            }
            let mut child = Command::new("zstd")
                .args(["-dcq", "--"])
                .arg(path)
                .stdout(Stdio::piped())
                .spawn()
                .with_context(|| format!("{name}: reading a .zst needs the zstd command"))?;
            let out = child.stdout.take().context("zstd's stdout")?;
            grow_pipe(&out);
            (
                Box::new(BufReader::with_capacity(1 << 20, out)),
                Some(child),
            )
        } else {
            let f = File::open(path).with_context(|| format!("{name}: cannot open it"))?;
            (Box::new(BufReader::with_capacity(1 << 20, f)), None)
        };
        let mut r = Reader {
            path: path.to_path_buf(),
            lines,
            child,
            line_no: 0,
            buf: String::new(),
            tail: vec![],
            ended: false,
            header: Header {
                format: String::new(),
                version: 0,
                recorded_by: String::new(),
                host: String::new(),
                kernel: String::new(),
                attach: String::new(),
                features: vec![],
                features_source: String::new(),
                hz: 0,
                duration_s: 0.0,
                records: 0,
                wakeups: 0,
                dropped: 0,
                not_kept: 0,
                not_recorded: BTreeMap::new(),
                sync_from_stack: None,
                comm: false,
                topology: vec![],
                busy: None,
            },
        };
        let want = format!("this scx_sisutil reads {FORMAT} version {VERSION}");
        if !r.next_line()? {
            bail!("{name}: empty, not a shadow recording ({want})");
        }
        let v: serde_json::Value = serde_json::from_str(&r.buf).map_err(|_| {
            anyhow::anyhow!("{name}: not a shadow recording: its first line is not JSON ({want})")
        })?;
        let (fmt, ver) = (v.get("format"), v.get("version"));
        if fmt.and_then(|f| f.as_str()) != Some(FORMAT) {
            bail!(
                "{name}: not a shadow recording (format {}; {want})",
                fmt.map(|f| f.to_string()).unwrap_or("missing".into())
            );
        }
        if ver.and_then(|v| v.as_u64()) != Some(VERSION as u64) {
            bail!(
                "{name}: {FORMAT} version {}, not {VERSION} ({want})",
                ver.map(|v| v.to_string()).unwrap_or("missing".into())
            );
        }
        r.header = serde_json::from_value(v)
            .map_err(|e| anyhow::anyhow!("{name}: a bad header line: {e}"))?;
        Ok(r)
    }

    /// The next line into self.buf; false at the end.
    fn next_line(&mut self) -> Result<bool> {
        self.buf.clear();
        let n = self
            .lines
            .read_line(&mut self.buf)
            .with_context(|| format!("{}: reading", self.path.display()))?;
        self.line_no += 1;
        Ok(n > 0)
    }

    /// The next whole record lines, about CHUNK_BYTES, into `buf` (cleared; the line the
    /// last read cut is kept for the next chunk): the chunk's first line number, None at
    /// the end. parse_chunk() reads the records, on any thread.
    pub fn raw_chunk(&mut self, buf: &mut Vec<u8>) -> Result<Option<u64>> {
        buf.clear();
        buf.append(&mut self.tail);
        let ctx = || format!("{}: reading", self.path.display());
        let mut seen = 0; // bytes with no line end
        let end = loop {
            let want = CHUNK_BYTES.saturating_sub(buf.len()).max(1 << 16) as u64;
            let got = (&mut self.lines)
                .take(want)
                .read_to_end(buf)
                .with_context(ctx)? as u64;
            if got < want {
                self.ended = true;
                break None; // the end of the file
            }
            // a line longer than the chunk: read on until its end
            if let Some(nl) = buf[seen..].iter().rposition(|&b| b == b'\n') {
                break Some(seen + nl + 1);
            }
            seen = buf.len();
        };
        if let Some(end) = end {
            self.tail.extend_from_slice(&buf[end..]);
            buf.truncate(end);
        } else if buf.is_empty() {
            self.finish()?;
            return Ok(None);
        }
        let first = self.line_no + 1;
        self.line_no += count_lines(buf);
        Ok(Some(first))
    }

    /// raw_chunk() has returned the last chunk (the next call gives None).
    pub fn at_end(&self) -> bool {
        self.ended
    }

    fn finish(&mut self) -> Result<()> {
        if let Some(mut c) = self.child.take() {
            let st = c.wait().context("waiting for zstd")?;
            if !st.success() {
                bail!("{}: zstd -d failed ({st})", self.path.display());
            }
        }
        Ok(())
    }

    /// The header's topology as the replay's machine.
    pub fn topo(&self) -> Result<TopoDesc> {
        if self.header.topology.is_empty() {
            bail!("{}: no topology in the header", self.path.display());
        }
        Ok(TopoDesc {
            cpus: self
                .header
                .topology
                .iter()
                .map(|c| CpuDesc {
                    id: c.cpu,
                    llc: c.llc,
                    core: c.core,
                    node: c.node,
                })
                .collect(),
        })
    }

    /// The header's features as the port's feature word.
    pub fn feat(&self) -> Result<u64> {
        features::apply(0, &self.header.features)
            .with_context(|| format!("{}: the header's features", self.path.display()))
    }
}

/// The records of `buf`, lines of `path` from line `first` (Reader::raw_chunk()), into `out`
/// (cleared): one JSON object after another (blank lines are whitespace); one that is not a
/// record fails with its line number.
pub fn parse_chunk(path: &Path, first: u64, buf: &[u8], out: &mut Vec<Rec>) -> Result<()> {
    out.clear();
    let text = std::str::from_utf8(buf).map_err(|e| {
        let line = first + count_lines(&buf[..e.valid_up_to()]);
        anyhow::anyhow!("{}:{line}: not a record: not UTF-8", path.display())
    })?;
    for l in serde_json::Deserializer::from_str(text).into_iter::<RecLine>() {
        let l = l.map_err(|e| {
            // serde_json's position is the chunk's: the file's line, and the column
            let msg = e.to_string();
            let msg = msg.rsplit_once(" at line ").map_or(msg.as_str(), |m| m.0);
            anyhow::anyhow!(
                "{}:{}: not a record: {msg} (column {})",
                path.display(),
                first + e.line().max(1) as u64 - 1,
                e.column()
            )
        })?;
        out.push(from_line(&l));
    }
    Ok(())
}

/// The line ends in `b` (a loop the compiler vectorizes: byte counters, 255 bytes at a time).
fn count_lines(b: &[u8]) -> u64 {
    b.chunks(255)
        .map(|c| c.iter().fold(0u8, |n, &x| n + (x == b'\n') as u8) as u64)
        .sum()
}

/// Sums over chunks (and files): the report's counts and each policy's raw sums.
#[derive(Default, Debug, Clone)]
struct Acc {
    records: u64,
    compared: u64,
    racy: u64,
    agreed: u64,
    current: u64,
    idle_available: u64,
    dis: BTreeMap<String, u64>,
    undecided: BTreeMap<String, u64>,
    /// per policy name: (features, wake-ups, CPUs examined, idle found, same as kernel)
    pol: Vec<(String, String, u64, u64, u64, u64)>,
    m_compared: u64,
    m_agreed: u64,
    m_dis: BTreeMap<String, u64>,
    /// the depth block's sums (None: no busy-time samples)
    depth: Option<DepthAcc>,
    /// vcpu_is_preempted(): Analysis::vcpu's sums
    vcpu: (u64, u64, u64),
}

fn add_map(to: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *to.entry(k.clone()).or_default() += v;
    }
}

impl Acc {
    /// The sums of one chunk of `n` records, analysed as `a` (with the loader's depths:
    /// `depth`).
    fn of(a: &Analysis, n: usize, depth: bool) -> Acc {
        let mut acc = Acc {
            records: n as u64,
            compared: a.compared,
            racy: a.racy,
            agreed: a.agreed,
            current: a.current_cpu,
            idle_available: a.idle_available,
            dis: a.disagreements.clone(),
            undecided: a.undecided.clone(),
            depth: depth.then(|| a.depth.clone()),
            vcpu: a.vcpu,
            ..Acc::default()
        };
        for p in &a.policies {
            acc.add_policy(p);
        }
        acc
    }

    fn add_policy(&mut self, p: &PolicyRow) {
        let n = p.wakeups as f64;
        // the row's integer sums back (exact: the counts are far below 2^53)
        let (scanned, idle, same) = (
            (p.cpus_examined_per_wakeup * n).round() as u64,
            (p.idle_found_pct * n / 100.0).round() as u64,
            (p.same_as_kernel_pct * n / 100.0).round() as u64,
        );
        self.add_sums(&(
            p.policy.clone(),
            p.features.clone(),
            p.wakeups,
            scanned,
            idle,
            same,
        ));
    }

    /// A policy's raw sums `s` (as `pol` holds them) added to its row, or a new row.
    fn add_sums(&mut self, s: &(String, String, u64, u64, u64, u64)) {
        match self.pol.iter_mut().find(|q| q.0 == s.0) {
            Some(q) => {
                if q.1 != s.1 {
                    q.1 = "per file".into();
                }
                q.2 += s.2;
                q.3 += s.3;
                q.4 += s.4;
                q.5 += s.5;
            }
            None => self.pol.push(s.clone()),
        }
    }

    fn add(&mut self, o: &Acc) {
        add_fields!(self, o; records, compared, racy, agreed, current, idle_available);
        self.vcpu.0 += o.vcpu.0;
        self.vcpu.1 += o.vcpu.1;
        self.vcpu.2 += o.vcpu.2;
        add_map(&mut self.dis, &o.dis);
        add_map(&mut self.undecided, &o.undecided);
        for s in &o.pol {
            self.add_sums(s);
        }
        add_fields!(self, o; m_compared, m_agreed);
        add_map(&mut self.m_dis, &o.m_dis);
        match (&mut self.depth, &o.depth) {
            (Some(d), Some(od)) => d.merge(od),
            (None, Some(od)) => self.depth = Some(od.clone()),
            _ => {}
        }
    }

    fn policy_rows(&self) -> Vec<PolicyRow> {
        self.pol
            .iter()
            .map(|(name, f, n, scanned, idle, same)| PolicyRow {
                policy: name.clone(),
                features: f.clone(),
                wakeups: *n,
                cpus_examined_per_wakeup: if *n == 0 {
                    0.0
                } else {
                    *scanned as f64 / *n as f64
                },
                idle_found_pct: pct(*idle, *n),
                same_as_kernel_pct: pct(*same, *n),
            })
            .collect()
    }

    fn mutant(&self, on: bool) -> Option<super::Mutant> {
        on.then(|| super::Mutant {
            compared: self.m_compared,
            agreed: self.m_agreed,
            agreement_pct: pct(self.m_agreed, self.m_compared),
            disagreements: self.m_dis.clone(),
        })
    }
}

/// One file's row of a replay.
#[derive(Serialize, Debug, Clone)]
pub struct FileReport {
    pub file: String,
    pub host: String,
    /// record lines replayed
    pub records: u64,
    #[serde(flatten)]
    pub report: Report,
}

/// Several files: the sums.
#[derive(Serialize, Debug, Clone)]
pub struct Total {
    pub files: usize,
    pub records: u64,
    pub wakeups: u64,
    pub compared: u64,
    pub racy: u64,
    pub dropped: u64,
    pub not_kept: u64,
    pub excluded_current_cpu: u64,
    pub undecided: BTreeMap<String, u64>,
    pub idle_available_pct: f64,
    pub agreed: u64,
    pub agreement_pct: f64,
    pub disagreements: BTreeMap<String, u64>,
    pub policies: Vec<PolicyRow>,
    pub vcpu_preempted: super::VcpuPreempted,
    /// the files' depth blocks summed (those that have one; null: none has)
    pub depth: Option<super::DepthReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mutant: Option<super::Mutant>,
}

#[derive(Serialize, Debug, Clone)]
pub struct ReplayReport {
    pub files: Vec<FileReport>,
    pub total: Total,
    pub sis_fit: String,
}

/// What a replay takes besides the files.
#[derive(Clone, Copy)]
pub struct ReplayArgs {
    pub fit: Option<FitRow>,
    pub mutant: bool,
    pub dump: bool,
}

/// Replay one file: its report row and its sums.
// long: the reading thread and the workers' closure share the file's state (topology,
// policies, feature word, the mutant's topology); the closure is the worker's whole loop
fn replay_file(path: &Path, args: ReplayArgs) -> Result<(FileReport, Acc)> {
    let mut rd = Reader::open(path)?;
    let desc = rd.topo()?;
    let topo = desc
        .build()
        .with_context(|| format!("{}: the header's topology", path.display()))?;
    let feat = rd.feat()?;
    let h = rd.header.clone();
    // the loader's depths from the header's busy-time samples (none in older files)
    let tl = h
        .busy
        .as_ref()
        .map(|b| Timeline::of(b, &desc.llcs(), desc.nr_cpu_ids()))
        .transpose()
        .with_context(|| format!("{}: the header's busy", path.display()))?;
    let policies = report_policies(feat, args.fit.is_some())?;
    let mutant_topo = args.mutant.then(|| {
        let mut mt = topo.clone();
        mutate_scan_start(&mut mt);
        mt
    });
    // one worker: its replay objects (the port's, the mutant's), its sums over the chunks it
    // parses and replays; `next` takes back the last chunk's buffer and gives the next chunk
    type Next<'a> = dyn FnMut(Option<Vec<u8>>) -> Result<Option<(u64, Vec<u8>)>> + 'a;
    let worker = |next: &mut Next| -> Result<Acc> {
        let mut obj = MaybeUninit::<OpenObject>::uninit();
        let mut rp = Replay::load(&mut obj, &topo, h.hz, args.fit)?;
        let mut mobj = MaybeUninit::<OpenObject>::uninit();
        let mut mrp = match &mutant_topo {
            Some(mt) => Some(Replay::load(&mut mobj, mt, h.hz, None)?),
            None => None,
        };
        let mut acc = Acc::default();
        let mut recs = vec![];
        let mut done = None;
        while let Some((first, buf)) = next(done.take())? {
            parse_chunk(path, first, &buf, &mut recs)?;
            done = Some(buf);
            let a = analyse_with(
                &mut rp,
                &recs,
                feat,
                &policies,
                args.dump,
                None,
                tl.as_ref(),
            )?;
            acc.add(&Acc::of(&a, recs.len(), tl.is_some()));
            if let Some(m) = mrp.as_mut() {
                let b = analyse_with(m, &recs, feat, &[], false, Some(&a.racy_mask), None)?;
                acc.m_compared += b.compared;
                acc.m_agreed += b.agreed;
                add_map(&mut acc.m_dis, &b.disagreements);
            }
        }
        Ok(acc)
    };
    // Files over one chunk are parsed and replayed by a worker per CPU (the records are
    // independent: each replay sets the whole machine from its snapshot), this thread
    // reading the chunks; the sums do not depend on which worker replayed what. --dump
    // keeps one worker (its lines in file order).
    let nw = std::thread::available_parallelism().map_or(1, |n| n.get());
    let one = |rd: &mut Reader, buf: Option<Vec<u8>>| -> Result<Option<(u64, Vec<u8>)>> {
        let mut buf = buf.unwrap_or_default();
        Ok(rd.raw_chunk(&mut buf)?.map(|first| (first, buf)))
    };
    let first = one(&mut rd, None)?;
    let acc = if args.dump || nw < 2 || rd.at_end() {
        let mut first = first;
        worker(&mut |buf| match first.take() {
            Some(c) => Ok(Some(c)),
            None => one(&mut rd, buf),
        })?
    } else {
        let (tx, rx) = crossbeam::channel::bounded::<(u64, Vec<u8>)>(nw);
        // the buffers the workers are done with, for the next chunks
        let (back_tx, back_rx) = crossbeam::channel::bounded::<Vec<u8>>(2 * nw + 2);
        std::thread::scope(|sc| -> Result<Acc> {
            let hs: Vec<_> = (0..nw)
                .map(|_| {
                    let (rx, back_tx) = (rx.clone(), back_tx.clone());
                    let worker = &worker;
                    sc.spawn(move || {
                        worker(&mut |buf| {
                            if let Some(b) = buf {
                                let _ = back_tx.try_send(b);
                            }
                            Ok(rx.recv().ok())
                        })
                    })
                })
                .collect();
            drop(rx);
            let mut read = Ok(());
            let mut chunk = first;
            while let Some(c) = chunk {
                if tx.send(c).is_err() {
                    break; // a worker failed: its error below
                }
                match one(&mut rd, back_rx.try_recv().ok()) {
                    Ok(c) => chunk = c,
                    Err(e) => {
                        read = Err(e);
                        break;
                    }
                }
            }
            drop(tx);
            let mut acc = Acc::default();
            for h in hs {
                acc.add(
                    &h.join()
                        .map_err(|_| anyhow::anyhow!("a replay worker panicked"))??,
                );
            }
            read?;
            Ok(acc)
        })?
    };
    // a file with samples has a block, if empty (no record, or none past the warm-up)
    let mut acc = acc;
    if tl.is_some() && acc.depth.is_none() {
        acc.depth = Some(DepthAcc::default());
    }
    if acc.records != h.records {
        bail!(
            "{}: {} records, its header says {} (a truncated file?)",
            path.display(),
            acc.records,
            h.records
        );
    }
    let report = Report {
        kernel: h.kernel.clone(),
        features: h.features.join(","),
        features_source: h.features_source.clone(),
        attach: h.attach.clone(),
        hz: h.hz,
        duration_s: h.duration_s,
        wakeups: h.wakeups,
        compared: acc.compared,
        racy: acc.racy,
        dropped: h.dropped,
        dropped_by_class: vec![],
        agreement_reweighted_pct: None,
        not_kept: h.not_kept,
        excluded_current_cpu: acc.current,
        undecided: acc.undecided.clone(),
        not_recorded: h.not_recorded.clone(),
        sync_from_stack: h
            .sync_from_stack
            .map(|[agree, differ]| SyncCheck { agree, differ }),
        idle_available_pct: pct(acc.idle_available, acc.compared),
        agreed: acc.agreed,
        agreement_pct: pct(acc.agreed, acc.compared),
        disagreements: acc.dis.clone(),
        policies: acc.policy_rows(),
        sis_fit: String::new(),
        vcpu_preempted: super::VcpuPreempted::of(acc.records, acc.vcpu),
        depth: acc.depth.as_ref().map(DepthAcc::report),
        mutant: acc.mutant(args.mutant),
    };
    Ok((
        FileReport {
            file: path.display().to_string(),
            host: h.host,
            records: acc.records,
            report,
        },
        acc,
    ))
}

/// Replay `paths` (each file's header checked before any replay): one row per file, the total.
pub fn replay(paths: &[PathBuf], args: ReplayArgs, sis_fit: String) -> Result<ReplayReport> {
    for p in paths {
        Reader::open(p)?;
    }
    let mut files = vec![];
    let mut all = Acc::default();
    let (mut wakeups, mut dropped, mut not_kept) = (0, 0, 0);
    for p in paths {
        let (mut f, acc) = replay_file(p, args)?;
        f.report.sis_fit = sis_fit.clone();
        wakeups += f.report.wakeups;
        dropped += f.report.dropped;
        not_kept += f.report.not_kept;
        all.add(&acc);
        files.push(f);
    }
    let total = Total {
        files: files.len(),
        records: all.records,
        wakeups,
        compared: all.compared,
        racy: all.racy,
        dropped,
        not_kept,
        excluded_current_cpu: all.current,
        undecided: all.undecided.clone(),
        idle_available_pct: pct(all.idle_available, all.compared),
        agreed: all.agreed,
        agreement_pct: pct(all.agreed, all.compared),
        disagreements: all.dis.clone(),
        policies: all.policy_rows(),
        vcpu_preempted: super::VcpuPreempted::of(all.records, all.vcpu),
        depth: all.depth.as_ref().map(DepthAcc::report),
        mutant: all.mutant(args.mutant),
    };
    Ok(ReplayReport {
        files,
        total,
        sis_fit,
    })
}

fn print_replay(r: &ReplayReport) {
    if let [one] = r.files.as_slice() {
        println!(
            "file {}  host {}  records {}",
            one.file, one.host, one.records
        );
        print_table(&one.report);
        return;
    }
    let w = r
        .files
        .iter()
        .map(|f| f.file.len())
        .max()
        .unwrap_or(0)
        .max(16);
    println!(
        "{:<w$} {:<16} {:<24} {:<10} {:>9} {:>9} {:>8} {:>9}",
        "file", "host", "kernel", "attach", "records", "compared", "racy", "agreed%"
    );
    // a row: file, host, kernel, attachment; records, compared, racy; agreement; the mutant's
    let row = |s: [&str; 4], n: [u64; 3], pct: f64, mutant: &Option<super::Mutant>| {
        let m = mutant
            .as_ref()
            .map(|m| format!("  (mutant {:.2} %)", m.agreement_pct))
            .unwrap_or_default();
        println!(
            "{:<w$} {:<16} {:<24} {:<10} {:>9} {:>9} {:>8} {pct:>9.2}{m}",
            s[0], s[1], s[2], s[3], n[0], n[1], n[2]
        );
    };
    for f in &r.files {
        let rep = &f.report;
        let s = [f.file.as_str(), &f.host, &rep.kernel, &rep.attach];
        row(
            s,
            [f.records, rep.compared, rep.racy],
            rep.agreement_pct,
            &rep.mutant,
        );
    }
    let t = &r.total;
    let name = format!("total ({} files)", t.files);
    let n = [t.records, t.compared, t.racy];
    row([&name, "", "", ""], n, t.agreement_pct, &t.mutant);
    println!(
        "wakeups {}  dropped {}  not kept {}  WF_CURRENT_CPU {}  compared {} ({:.1} % with an idle CPU)",
        t.wakeups, t.dropped, t.not_kept, t.excluded_current_cpu, t.compared, t.idle_available_pct
    );
    if !t.undecided.is_empty() {
        println!("undecided: {:?}", t.undecided);
    }
    for (step, n) in &t.disagreements {
        println!("  disagreement at {step:<20} {n}");
    }
    super::print_policies(&t.policies, 16);
    println!("fitted depth: {}", r.sis_fit);
    print_depth(t.depth.as_ref());
}

/// `shadow --replay FILE...`
pub fn replay_main(opts: &ShadowOpts) -> Result<()> {
    let ro = ReportOpts::of(opts)?;
    let args = ReplayArgs {
        fit: ro.fit,
        mutant: opts.mutate_scan_start,
        dump: opts.dump,
    };
    let r = replay(&opts.replay, args, ro.sis_fit.clone())?;
    let title = format!(
        "shadow --replay: {} files ({} compared wake-ups, {:.1} % agreement)",
        r.files.len(),
        r.total.compared,
        r.total.agreement_pct
    );
    ro.show(opts.json, &r, print_replay, &r.total, &title)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field of a record survives the line and back (masks on several words).
    #[test]
    // long: one record through every way a line is written and read (exit reads or none,
    // names or none, unknown fields, bad masks): each case edits the one before
    fn shadow_record_line_round_trips() {
        let mut r = Rec {
            jiffies: 4_295_000_000,
            ns: u64::MAX - 1,
            this_cpu: 3,
            prev: 130,
            chosen: 511,
            wake_flags: 0x18,
            recent_used_cpu: -1,
            waker_decay_ts_exit: 7,
            has_idle_cores: [-1, 1],
            nr_idle_scan_exit: [4, 2],
            util_sum: [1, u64::MAX],
            util_avg_sum: [0, 4096],
            stack_sync: -1,
            pc_layout: 3,
            wa_exit_read: 1,
            this_nr_running_exit: 3,
            this_load_exit: 9,
            wakee_load_exit: 5,
            ..Default::default()
        };
        r.allowed = [u64::MAX; 8];
        r.read[2] = 1 << 63;
        r.idle_exit[7] = 1 << 63 | 1;
        r.waker_comm = comm_to("hackbench");
        let line = serde_json::to_string(&to_line(&r, true)).unwrap();
        let back = from_line(&serde_json::from_str(&line).unwrap());
        assert_eq!(format!("{back:?}"), format!("{r:?}"));
        assert!(line.contains(r#""read":[191]"#), "{line}");
        assert!(line.contains(r#""idle_exit":[448,511]"#), "{line}");
        assert!(line.contains(r#""wa_exit":{"this_nr_running":3"#), "{line}");
        assert!(line.contains(r#""util_avg_sum":[0,4096]"#), "{line}");
        assert!(!line.contains("vcpu_preempted"), "not read: absent: {line}");
        // vcpu_is_preempted() read: the mask as a CPU list, and back
        let mut vr = r;
        (vr.vcpu_read, vr.vcpu_preempted[1]) = (1, 0b101);
        let vline = serde_json::to_string(&to_line(&vr, true)).unwrap();
        assert!(vline.contains(r#""vcpu_preempted":[64,66]"#), "{vline}");
        let back = from_line(&serde_json::from_str(&vline).unwrap());
        assert_eq!(format!("{back:?}"), format!("{vr:?}"));
        // a file's line without util_avg sums (recorded before them) reads as unknown, and
        // writes back as it was
        let mut v: serde_json::Value = serde_json::from_str(&line).unwrap();
        v.as_object_mut().unwrap().remove("util_avg_sum");
        let before = serde_json::to_string(&v).unwrap();
        let back = from_line(&serde_json::from_str(&before).unwrap());
        assert_eq!(back.util_avg_sum, UTIL_AVG_UNKNOWN);
        let again = serde_json::to_string(&to_line(&back, true)).unwrap();
        assert!(!again.contains("util_avg_sum"), "{again}");
        // a record without exit reads (before them) writes none and reads back without
        let mut old = r;
        old.wa_exit_read = 0;
        old.this_nr_running_exit = 0;
        old.this_load_exit = 0;
        old.wakee_load_exit = 0;
        let line = serde_json::to_string(&to_line(&old, true)).unwrap();
        assert!(!line.contains("wa_exit"), "{line}");
        let back = from_line(&serde_json::from_str(&line).unwrap());
        assert_eq!(format!("{back:?}"), format!("{old:?}"));
        // without --comm no name is written, and none comes back
        let line = serde_json::to_string(&to_line(&r, false)).unwrap();
        assert!(!line.contains("comm"), "{line}");
        assert!(!line.contains("hackbench"), "{line}");
        let l: RecLine = serde_json::from_str(&line).unwrap();
        assert_eq!(from_line(&l).waker_comm, [0; 16]);
        // a field this build does not know (a later writer's optional one) is skipped
        let more = line.replacen('{', r#"{"depth_loader":[3,4],"note":{"a":1},"#, 1);
        let l: RecLine = serde_json::from_str(&more).unwrap();
        assert_eq!(from_line(&l).read, r.read);
        // a CPU past the masks, or not a number, is one error naming the line, not a panic
        let p = Path::new("x.jsonl");
        let mut recs = vec![];
        for (bad, want) in [
            (
                line.replace(r#""read":[191]"#, r#""read":[512]"#),
                "CPU 512 over 511",
            ),
            (
                line.replace(r#""read":[191]"#, r#""read":[-1]"#),
                "invalid value",
            ),
            (
                line.replace(r#""read":[191]"#, r#""read":7"#),
                "a list of CPU ids",
            ),
        ] {
            let text = format!("{line}\n\n{bad}\n");
            let e = parse_chunk(p, 2, text.as_bytes(), &mut recs).unwrap_err();
            let e = format!("{e:#}");
            assert!(
                e.starts_with("x.jsonl:4: not a record: ") && e.contains(want),
                "{e}"
            );
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        // blank lines are skipped; the last line needs no newline
        let text = format!("{line}\n\n  \n{line}");
        parse_chunk(p, 2, text.as_bytes(), &mut recs).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(format!("{:?}", recs[1]), format!("{:?}", from_line(&l)));
    }

    /// raw_chunk() cuts at line ends only, numbers the lines, and gives every byte once,
    /// whatever the chunk size against the line lengths (a line longer than a chunk too).
    #[test]
    fn shadow_raw_chunks_cut_at_line_ends() {
        let d = tempfile::tempdir().unwrap();
        let header = r#"{"format":"scx_sisutil-shadow","version":1,"recorded_by":"t","host":"h","kernel":"k","attach":"fentry","features":[],"features_source":"","hz":250,"duration_s":1.0,"records":3,"wakeups":3,"dropped":0,"not_kept":0,"not_recorded":{},"sync_from_stack":null,"comm":false,"topology":[]}"#;
        let long = "y".repeat(3 * CHUNK_BYTES / 2);
        let body = format!("a\n{long}\nb\nc");
        let p = write_tmp(&d, "r.jsonl", &format!("{header}\n{body}"));
        let mut rd = Reader::open(&p).unwrap();
        let (mut all, mut buf, mut firsts) = (vec![], vec![], vec![]);
        while let Some(first) = rd.raw_chunk(&mut buf).unwrap() {
            assert!(rd.at_end() || buf.ends_with(b"\n"));
            firsts.push(first);
            all.extend_from_slice(&buf);
        }
        assert!(rd.at_end());
        assert_eq!(String::from_utf8(all).unwrap(), body);
        assert_eq!(firsts[0], 2);
        assert!(firsts.windows(2).all(|w| w[0] < w[1]), "{firsts:?}");
    }

    fn write_tmp(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// Another format, another version, a non-JSON file, an empty one: one line each, naming
    /// the file and what this build reads.
    #[test]
    fn shadow_replay_refuses_other_files_in_one_line() {
        let d = tempfile::tempdir().unwrap();
        for (name, text, want) in [
            (
                "v2.jsonl",
                r#"{"format":"scx_sisutil-shadow","version":2}"#,
                "scx_sisutil-shadow version 2, not 1",
            ),
            (
                "other.jsonl",
                r#"{"format":"pcap","version":1}"#,
                "not a shadow recording (format \"pcap\"",
            ),
            ("text.jsonl", "hello\n", "its first line is not JSON"),
            ("empty.jsonl", "", "empty, not a shadow recording"),
        ] {
            let p = write_tmp(&d, name, text);
            let e = format!("{:#}", Reader::open(&p).err().expect(name));
            assert_eq!(e.lines().count(), 1, "{e}");
            assert!(e.contains(want) && e.contains(name), "{name}: {e}");
        }
        let e = format!(
            "{:#}",
            Reader::open(Path::new("/nonexistent.jsonl.zst"))
                .err()
                .unwrap()
        );
        assert!(e.contains("no such file"), "{e}");
    }

    fn corpus() -> Vec<PathBuf> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".jsonl.zst"))
            .collect();
        files.sort();
        files
    }

    /// The 6.18 host's mixed recording of the corpus (several chunks; no busy samples).
    fn host_mixed() -> PathBuf {
        corpus()
            .into_iter()
            .find(|p| {
                p.to_string_lossy()
                    .contains("6.18.44-fc-v657-host-tracepoint-mixed")
            })
            .expect("the 6.18 host's mixed recording")
    }

    /// Floor of agreement per corpus file, on its compared (neither racy nor undecided)
    /// wake-ups; a file must compare at least MIN_COMPARED to count.
    const MIN_AGREEMENT_PCT: f64 = 99.0;
    const MIN_COMPARED: u64 = 100;

    /// The committed corpus (tests/corpus: real kernels' wake-ups, README there) replayed
    /// through the port: >= 99 % agreement in every file. The mutant port (the LLC scan from
    /// target, not target + 1) replays the same records and must fall under 99 % in at least
    /// one file (tools/mutants has the same as a source mutant, and a wake_affine one).
    /// Needs bpf() (root); no tracing, no sched_ext.
    #[test]
    fn shadow_corpus_agrees() {
        let files = corpus();
        assert!(!files.is_empty(), "no tests/corpus/*.jsonl.zst");
        let args = ReplayArgs {
            fit: None,
            mutant: true,
            dump: false,
        };
        let r = replay(&files, args, String::new()).unwrap();
        let mut low = vec![];
        let mut mutant_low = 0;
        for f in &r.files {
            let m = f.report.mutant.as_ref().unwrap();
            println!(
                "{} ({} {}): {} records, {} compared, {} racy, agreement {:.2} % {:?}, mutant {:.2} %",
                f.file.rsplit('/').next().unwrap(),
                f.report.kernel,
                f.report.attach,
                f.records,
                f.report.compared,
                f.report.racy,
                f.report.agreement_pct,
                f.report.disagreements,
                m.agreement_pct
            );
            if f.report.compared < MIN_COMPARED || f.report.agreement_pct < MIN_AGREEMENT_PCT {
                low.push(f.file.clone());
            }
            mutant_low += (m.agreement_pct < MIN_AGREEMENT_PCT) as usize;
        }
        assert!(
            low.is_empty(),
            "under {MIN_AGREEMENT_PCT} % agreement or {MIN_COMPARED} compared: {low:?}"
        );
        assert!(
            mutant_low > 0,
            "the mutant port (scan from target) keeps >= {MIN_AGREEMENT_PCT} % in every file"
        );
        // every kernel of the corpus is there
        for k in ["6.12.", "7.", "6.18."] {
            assert!(
                r.files.iter().any(|f| f.report.kernel.starts_with(k)),
                "no {k}x recording in tests/corpus"
            );
        }
    }

    /// --record then --replay: the records and the busy-time samples come back, and a `.zst`
    /// name is written through zstd (read back through it too): the same report as the
    /// file recorded from, now with a depth block (the same from either file); the corpus
    /// file itself (recorded before the samples) has none.
    #[test]
    // long: one recording written both ways (plain, zstd) and replayed; its steps share the
    // records, the samples and the base report
    fn shadow_record_then_replay_keeps_the_busy_samples() {
        use super::super::depth::INTERVAL_NS;
        let f = host_mixed();
        let args = ReplayArgs {
            fit: None,
            mutant: false,
            dump: false,
        };
        let base = replay(std::slice::from_ref(&f), args, String::new()).unwrap();
        let base = &base.files[0];
        assert!(base.report.depth.is_none());
        let mut rd = Reader::open(&f).unwrap();
        let desc = rd.topo().unwrap();
        let feat = rd.feat().unwrap();
        let (mut recs, mut buf, mut chunk) = (vec![], vec![], vec![]);
        while let Some(first) = rd.raw_chunk(&mut buf).unwrap() {
            parse_chunk(&f, first, &buf, &mut chunk).unwrap();
            recs.extend_from_slice(&chunk);
        }
        // every CPU idle half of each interval, from 1 s before the first wake-up to the last
        let t0 = recs.iter().map(|r| r.ns).min().unwrap() - 1_000_000_000;
        let n = (recs.iter().map(|r| r.ns).max().unwrap() - t0) / INTERVAL_NS + 1;
        let cpus: Vec<usize> = desc.cpus.iter().map(|c| c.id).collect();
        let samples = (0..=n)
            .map(|k| {
                let mut s = vec![t0 + k * INTERVAL_NS];
                s.extend(cpus.iter().map(|_| k * INTERVAL_NS / 2));
                s
            })
            .collect();
        let rec = Recording {
            recs,
            attach: "tracepoint",
            dropped: 0,
            not_kept: 0,
            skipped: BTreeMap::new(),
            sync_check: None,
            dropped_by_class: vec![],
            busy: Busy {
                interval_ns: INTERVAL_NS,
                cpus,
                samples,
            },
        };
        let d = tempfile::tempdir().unwrap();
        let mut reps = vec![];
        for name in ["r.jsonl", "r.jsonl.zst"] {
            let p = d.path().join(name);
            Out::create(&p)
                .unwrap()
                .write(&base.report, &desc, feat, &rec, false)
                .unwrap();
            let head = std::fs::read(&p).unwrap()[..4].to_vec();
            assert_eq!(
                head == [0x28, 0xb5, 0x2f, 0xfd],
                name.ends_with(".zst"),
                "{name}"
            );
            let mut r = replay(&[p], args, String::new()).unwrap();
            reps.push(r.files.remove(0));
        }
        for r in &reps {
            assert_eq!(r.records, base.records);
            let (a, b) = (&r.report, &base.report);
            assert_eq!(
                (a.compared, a.agreed, a.racy),
                (b.compared, b.agreed, b.racy)
            );
            let dep = a
                .depth
                .as_ref()
                .expect("no depth block from the recorded samples");
            assert!(dep.wakeups > 0, "{dep:?}");
        }
        assert_eq!(reps[0].report.depth, reps[1].report.depth);
    }

    /// A header whose busy-time samples do not fit its topology (a CPU it does not have, a
    /// sample short of a CPU, a clock going back) is refused in one line naming the file.
    #[test]
    fn shadow_replay_refuses_bad_busy_samples_in_one_line() {
        let d = tempfile::tempdir().unwrap();
        let header = |busy: &str| {
            format!(
                r#"{{"format":"scx_sisutil-shadow","version":1,"recorded_by":"t","host":"h","kernel":"k","attach":"fentry","features":[],"features_source":"","hz":250,"duration_s":1.0,"records":0,"wakeups":0,"dropped":0,"not_kept":0,"not_recorded":{{}},"sync_from_stack":null,"comm":false,"topology":[{{"cpu":0,"llc":0,"core":0,"node":0}},{{"cpu":1,"llc":0,"core":1,"node":0}}],"busy":{busy}}}"#
            )
        };
        let args = ReplayArgs {
            fit: None,
            mutant: false,
            dump: false,
        };
        let ok = write_tmp(
            &d,
            "ok.jsonl",
            &header(r#"{"interval_ns":20000000,"cpus":[0,1],"samples":[[5,0,0],[6,1,1]]}"#),
        );
        assert!(replay(&[ok], args, String::new())
            .unwrap()
            .total
            .depth
            .is_some());
        for (name, busy, want) in [
            (
                "cpu.jsonl",
                r#"{"interval_ns":1,"cpus":[0,7],"samples":[]}"#,
                "CPU 7 is not in the topology",
            ),
            (
                "short.jsonl",
                r#"{"interval_ns":1,"cpus":[0,1],"samples":[[5,0]]}"#,
                "sample 0 has 2 values, not 3",
            ),
            (
                "back.jsonl",
                r#"{"interval_ns":1,"cpus":[0,1],"samples":[[5,0,0],[4,0,0]]}"#,
                "sample 1's time 4 is 0 or goes back",
            ),
        ] {
            let p = write_tmp(&d, name, &header(busy));
            let e = format!("{:#}", replay(&[p], args, String::new()).expect_err(name));
            assert_eq!(e.lines().count(), 1, "{e}");
            assert!(
                e.contains(name) && e.contains("busy") && e.contains(want),
                "{e}"
            );
        }
    }

    /// Replays are deterministic: a file of several chunks (parsed and replayed by a worker
    /// per CPU, in whatever order the workers take them) gives the same report twice, and
    /// the same as one worker replaying every chunk in file order (--dump's path).
    #[test]
    fn shadow_replay_is_deterministic() {
        let f = host_mixed();
        let mut rd = Reader::open(&f).unwrap();
        let mut buf = vec![];
        let mut chunks = 0;
        while rd.raw_chunk(&mut buf).unwrap().is_some() {
            chunks += 1;
        }
        assert!(chunks >= 2, "{}: {chunks} chunk", f.display());
        let run = |dump| {
            let args = ReplayArgs {
                fit: None,
                mutant: true,
                dump,
            };
            serde_json::to_string(&replay(std::slice::from_ref(&f), args, String::new()).unwrap())
                .unwrap()
        };
        let workers = run(false);
        assert_eq!(workers, run(false));
        assert_eq!(workers, run(true));
    }
}
