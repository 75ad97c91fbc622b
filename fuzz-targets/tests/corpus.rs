//! Every fuzz target over its committed seed corpus, then over mutations of it for a
//! couple of seconds (`FUZZ_SECONDS` per target; 0 for the corpus alone; `FUZZ_ONLY`
//! names one target to run alone). Not a
//! substitute for coverage-guided runs (`cargo fuzz run TARGET` in `fuzz/`), but it
//! runs on every test and replays every input a fuzzer ever found (kept in the corpus).
//! A failing input is written to `target/fuzz-failures/` for `cargo fuzz run TARGET FILE`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fuzz_targets::{Target, TARGETS};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus").join(target)
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = corpus_dir(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

/// xorshift64*: the same mutations on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One to four edits: flip, set, insert, delete, duplicate a run, or splice another seed in.
fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut d = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(d.len() + 1);
        match rng.below(6) {
            0 if !d.is_empty() => {
                let i = at.min(d.len() - 1);
                d[i] ^= 1 << rng.below(8);
            }
            1 if !d.is_empty() => {
                let i = at.min(d.len() - 1);
                d[i] = [0, 0xff, 0x7f, 0x80, 1, rng.next() as u8][rng.below(6)];
            }
            2 => d.insert(at, rng.next() as u8),
            3 if !d.is_empty() => {
                let end = (at + 1 + rng.below(8)).min(d.len());
                d.drain(at.min(d.len() - 1)..end);
            }
            4 if !d.is_empty() => {
                let start = at.min(d.len() - 1);
                let run: Vec<u8> = d[start..(start + 1 + rng.below(16)).min(d.len())].to_vec();
                d.splice(at..at, run);
            }
            _ if !other.is_empty() => {
                let from = rng.below(other.len());
                let part = &other[from..(from + 1 + rng.below(32)).min(other.len())];
                d.splice(at..at, part.iter().copied());
            }
            _ => d.push(rng.next() as u8),
        }
    }
    d
}

fn check(name: &str, f: fn(&[u8]), input: &[u8]) {
    if catch_unwind(AssertUnwindSafe(|| f(input))).is_err() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/fuzz-failures");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!(
            "{name}-{:016x}",
            input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| { (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3) })
        ));
        std::fs::write(&path, input).unwrap();
        panic!("{name} failed on {} (input saved)", path.display());
    }
}

#[test]
fn every_target_passes_its_corpus_and_a_few_seconds_of_mutations() {
    let budget = std::env::var("FUZZ_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let only = std::env::var("FUZZ_ONLY").ok();
    let targets: Vec<(&str, Target)> =
        TARGETS.iter().copied().filter(|(n, _)| only.as_deref().is_none_or(|o| o == *n)).collect();
    // One worker per CPU, each taking the next target: every target still has its budget
    // on a CPU to itself (as many mutations as one after the other), in a share of the
    // time. A target that fails panics its worker, and the scope passes the panic on.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(targets.len());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while let Some(&(name, f)) = targets.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
                    fuzz_one(name, f, budget);
                }
            });
        }
    });
}

/// `name`'s corpus, then its mutations for `budget` seconds.
fn fuzz_one(name: &str, f: Target, budget: f64) {
    let seeds = corpus(name);
    assert!(!seeds.is_empty(), "{name}: no seed corpus in {}", corpus_dir(name).display());
    for s in &seeds {
        check(name, f, s);
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
    let until = Instant::now() + Duration::from_secs_f64(budget);
    let mut runs = 0u64;
    while Instant::now() < until {
        let seed = &seeds[rng.below(seeds.len())];
        let other = &seeds[rng.below(seeds.len())];
        check(name, f, &mutate(&mut rng, seed, other));
        runs += 1;
    }
    eprintln!("{name}: {} seeds, {runs} mutations", seeds.len());
}
