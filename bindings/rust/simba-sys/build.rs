//! Finds libsimba and compiles the small C glue (csrc/glue.c).
//!
//! Library: `SIMBA_LIB_DIR` (a directory holding libsimba.so), else
//! `pkg-config --libs simba`, else the linker's default paths. An rpath to the
//! directory found is embedded so test binaries and examples run without
//! LD_LIBRARY_PATH.
//!
//! Header for the glue: `SIMBA_INCLUDE_DIR`, else `pkg-config --cflags simba`,
//! else the source tree's `include/` (this crate lives in bindings/rust/).
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn pkg_config(args: &[&str]) -> Option<String> {
    let out = Command::new(env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into()))
        .args(args)
        .arg("simba")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=SIMBA_LIB_DIR");
    println!("cargo:rerun-if-env-changed=SIMBA_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-changed=csrc/glue.c");
    println!("cargo::rustc-check-cfg=cfg(simba_c_glue)");

    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());

    // Include dirs for the glue.
    let mut includes: Vec<PathBuf> = Vec::new();
    if let Ok(d) = env::var("SIMBA_INCLUDE_DIR") {
        includes.push(d.into());
    } else if let Some(cflags) = pkg_config(&["--cflags-only-I"]) {
        includes.extend(cflags.split_whitespace().filter_map(|f| f.strip_prefix("-I")).map(PathBuf::from));
    }
    let in_tree = manifest.join("../../../include");
    if in_tree.join("simba.h").exists() {
        includes.push(in_tree);
    }

    // The glue must come before -lsimba on the link line.
    if compile_glue(&out_dir, &includes) {
        println!("cargo:rustc-cfg=simba_c_glue");
    } else {
        println!("cargo:warning=simba-sys: no C compiler or no simba.h: raw C benchmark helpers disabled");
    }

    let mut lib_dirs: Vec<String> = Vec::new();
    if let Ok(d) = env::var("SIMBA_LIB_DIR") {
        lib_dirs.push(d);
    } else if let Some(libs) = pkg_config(&["--libs-only-L"]) {
        lib_dirs.extend(libs.split_whitespace().filter_map(|f| f.strip_prefix("-L")).map(String::from));
    }
    for d in &lib_dirs {
        println!("cargo:rustc-link-search=native={d}");
        println!("cargo:rustc-link-arg=-Wl,-rpath,{d}");
    }
    if let Some(d) = lib_dirs.first() {
        println!("cargo:root={d}");
    }
    println!("cargo:rustc-link-lib=dylib=simba");
}

fn compile_glue(out_dir: &Path, includes: &[PathBuf]) -> bool {
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let obj = out_dir.join("glue.o");
    let mut cmd = Command::new(&cc);
    cmd.args(["-O2", "-fPIC", "-std=c99", "-Wall", "-c", "csrc/glue.c", "-o"]).arg(&obj);
    for i in includes {
        cmd.arg(format!("-I{}", i.display()));
    }
    match cmd.status() {
        Ok(s) if s.success() => {}
        _ => return false,
    }
    let lib = out_dir.join("libsimba_sys_glue.a");
    let _ = std::fs::remove_file(&lib);
    let ar = env::var("AR").unwrap_or_else(|_| "ar".into());
    match Command::new(ar).arg("crs").arg(&lib).arg(&obj).status() {
        Ok(s) if s.success() => {}
        _ => return false,
    }
    println!("cargo:rustc-link-search=native={}", out_dir.display());
    println!("cargo:rustc-link-lib=static=simba_sys_glue");
    true
}
