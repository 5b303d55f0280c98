//! The rpath to libsimba, as the README tells a downstream crate to write it:
//! `simba` passes the library's directory on as `DEP_SIMBA_RS_LIB_DIR`
//! (a dependency's link arguments do not reach a dependent's binaries).
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_SIMBA_RS_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_SIMBA_RS_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
