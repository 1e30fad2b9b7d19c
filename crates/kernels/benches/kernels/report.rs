//! The benchmark's results and their two renderings: a table for people, one JSON object for
//! tools.

use std::fmt::Write;

use rayon::ThreadPool;
use rinfer_formats::GgmlType;

/// One matvec measurement.
pub struct MatvecRow {
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    pub threads: usize,
    pub gbs: f64,
    pub pct_of_bandwidth: f64,
}

/// One matmul measurement.
pub struct MatmulRow {
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    /// The first `rows_measured` rows were timed (see `MATMUL_MAX_MACS`).
    pub rows_measured: usize,
    pub n: usize,
    pub threads: usize,
    pub gflops: f64,
}

/// Everything one run measured.
pub struct Report {
    isa: &'static str,
    /// The 1-minute load average before and after the run, where the OS reports it: other
    /// work on the machine lowers every figure.
    pub load: [Option<f64>; 2],
    /// `(threads, GB/s)` of the streaming-sum read bandwidth.
    bandwidth: Vec<(usize, f64)>,
    pub matvec: Vec<MatvecRow>,
    pub matmul: Vec<MatmulRow>,
}

/// What a reader needs to know to interpret the figures.
const NOTES: [&str; 3] = [
    "matvec cycles through copies of its matrix totalling at least 1 GiB, so every call \
     streams its weights from memory as decode does; GB/s counts weight bytes only",
    "matmul on large shapes times only the first rows (rows_measured) so a full run stays \
     within minutes; rows are independent, so the rate is that of the whole matrix",
    "256-value block types (K-quants, IQ4_XS) do not fit 640-wide rows; those shapes are \
     skipped for them, as llama.cpp quantizes such tensors to other types",
];

impl Report {
    pub fn new(isa: &'static str, pools: &[(usize, ThreadPool)], bandwidth: &[f64]) -> Self {
        Report {
            isa,
            load: [None, None],
            bandwidth: pools
                .iter()
                .map(|p| p.0)
                .zip(bandwidth.iter().copied())
                .collect(),
            matvec: Vec::new(),
            matmul: Vec::new(),
        }
    }

    /// The table printed without `--json`.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let w = &mut out;
        let _ = writeln!(w, "kernels: {}", self.isa);
        let bw: Vec<String> = self
            .bandwidth
            .iter()
            .map(|(t, g)| format!("{g:.1} GB/s on {t} thread(s)"))
            .collect();
        let _ = writeln!(w, "read bandwidth: {}", bw.join(", "));
        let load = self
            .load
            .map(|l| l.map_or("unknown".into(), |l| format!("{l:.2}")));
        let _ = writeln!(
            w,
            "machine load (1-minute average): {} before, {} after",
            load[0], load[1]
        );
        for note in NOTES {
            let _ = writeln!(w, "note: {note}");
        }

        let _ = writeln!(
            w,
            "\nmatvec: GB/s of weights streamed (% of read bandwidth)"
        );
        let _ = write!(w, "{:<8} {:>15} {:>9}", "type", "rows x cols", "MiB");
        for (t, _) in &self.bandwidth {
            let _ = write!(w, " {:>16}", format!("{t} thread(s)"));
        }
        let _ = writeln!(w);
        let same_shape =
            |a: &MatvecRow, b: &MatvecRow| (a.ty, a.rows, a.cols) == (b.ty, b.rows, b.cols);
        for group in self.matvec.chunk_by(same_shape) {
            let r = &group[0];
            let mib =
                (r.rows * r.cols / r.ty.block_size() * r.ty.type_size()) as f64 / (1 << 20) as f64;
            let _ = write!(
                w,
                "{:<8} {:>15} {:>9.2}",
                r.ty.name(),
                shape(r.rows, r.cols),
                mib
            );
            for r in group {
                let _ = write!(w, " {:>8.1} {:>6.0}%", r.gbs, r.pct_of_bandwidth);
            }
            let _ = writeln!(w);
        }

        let same_shape =
            |a: &MatmulRow, b: &MatmulRow| (a.ty, a.rows, a.cols) == (b.ty, b.rows, b.cols);
        let threads = self.matmul.first().map_or(0, |r| r.threads);
        let _ = writeln!(
            w,
            "\nmatmul: GFLOP/s on {threads} thread(s); * = timed on the first rows only"
        );
        let _ = write!(w, "{:<8} {:>15}", "type", "rows x cols");
        for r in self.matmul.chunk_by(same_shape).next().unwrap_or_default() {
            let _ = write!(w, " {:>9}", format!("N={}", r.n));
        }
        let _ = writeln!(w);
        for group in self.matmul.chunk_by(same_shape) {
            let r = &group[0];
            let _ = write!(w, "{:<8} {:>15}", r.ty.name(), shape(r.rows, r.cols));
            for r in group {
                let mark = if r.rows_measured < r.rows { "*" } else { " " };
                let _ = write!(w, " {:>8.1}{mark}", r.gflops);
            }
            let _ = writeln!(w);
        }
        out
    }

    /// The single JSON object printed with `--json`.
    pub fn json(&self) -> String {
        let bandwidth: Vec<String> = self
            .bandwidth
            .iter()
            .map(|(t, g)| format!("\"{t}\":{g:.3}"))
            .collect();
        let matvec: Vec<String> = self
            .matvec
            .iter()
            .map(|r| {
                format!(
                    "{{\"type\":\"{}\",\"rows\":{},\"cols\":{},\"threads\":{},\"gbs\":{:.3},\
                     \"pct_of_bandwidth\":{:.1}}}",
                    r.ty.name(),
                    r.rows,
                    r.cols,
                    r.threads,
                    r.gbs,
                    r.pct_of_bandwidth
                )
            })
            .collect();
        let matmul: Vec<String> = self
            .matmul
            .iter()
            .map(|r| {
                format!(
                    "{{\"type\":\"{}\",\"rows\":{},\"cols\":{},\"rows_measured\":{},\"n\":{},\
                     \"threads\":{},\"gflops\":{:.3}}}",
                    r.ty.name(),
                    r.rows,
                    r.cols,
                    r.rows_measured,
                    r.n,
                    r.threads,
                    r.gflops
                )
            })
            .collect();
        let notes: Vec<String> = NOTES.iter().map(|n| format!("\"{n}\"")).collect();
        let load = self
            .load
            .map(|l| l.map_or("null".into(), |l| format!("{l:.2}")));
        format!(
            "{{\"isa\":\"{}\",\"load_avg\":[{},{}],\"bandwidth_gbs\":{{{}}},\"matvec\":[{}],\
             \"matmul\":[{}],\"notes\":[{}]}}",
            self.isa,
            load[0],
            load[1],
            bandwidth.join(","),
            matvec.join(","),
            matmul.join(","),
            notes.join(",")
        )
    }
}

/// The 1-minute load average, on systems with `/proc/loadavg`.
pub fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn shape(rows: usize, cols: usize) -> String {
    format!("{rows} x {cols}")
}
