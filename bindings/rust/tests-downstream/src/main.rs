//! Runs a lock cycle and says which libsimba the loader picked: with
//! `SIMBA_EXPECT_LIB_DIR` set, it must be the one in that directory.
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = simba::Client::open("memory://downstream")?;
    let held = client.lock("downstream.lock", Duration::from_secs(5))?;
    println!("libsimba {} token {}", simba::version_string(), held.token());
    held.unlock()?;
    client.close()?;

    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let loaded = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libsimba.so"))
        .ok_or("libsimba is not mapped")?;
    println!("loaded {loaded}");
    if let Some(dir) = std::env::var_os("SIMBA_EXPECT_LIB_DIR") {
        let want = std::fs::canonicalize(dir)?;
        let got = std::fs::canonicalize(loaded)?;
        if got.parent() != Some(want.as_path()) {
            return Err(format!("loaded {} instead of a library in {}", got.display(), want.display()).into());
        }
    }
    if std::env::var_os("LD_LIBRARY_PATH").is_some() {
        return Err("LD_LIBRARY_PATH is set: this check proves nothing".into());
    }
    Ok(())
}
