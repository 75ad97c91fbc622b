//! Compiles the XDP classifier (`ebpf/classifier.bpf.c`, at the top of the project beside
//! the other parts) into an object file the switch embeds and loads with libbpf-rs.

use std::{env, path::PathBuf};

use libbpf_cargo::SkeletonBuilder;

const SOURCE: &str = "../../ebpf/classifier.bpf.c";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    // clang -target bpf does not search the multiarch include directory by itself, and
    // <linux/types.h> needs <asm/types.h> from there.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = match arch.as_str() {
        "x86_64" => "x86_64-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        "riscv64" => "riscv64-linux-gnu",
        other => panic!("no multiarch include directory known for target arch {other}"),
    };
    SkeletonBuilder::new()
        .source(SOURCE)
        .obj(out.join("classifier.bpf.o"))
        .clang_args([format!("-I/usr/include/{multiarch}"), "-Wall".to_string()])
        .build()
        .unwrap_or_else(|e| {
            panic!("compiling {SOURCE} failed ({e:#}); are clang and libelf-dev installed? run scripts/setup.sh")
        });
    println!("cargo:rerun-if-changed={SOURCE}");
}
