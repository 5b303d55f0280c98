//! Lock-cycle benchmark: `Client::lock` + `LockTerm::unlock` against the same
//! loop written in C (simba-sys's csrc/glue.c: `simba_lock_acquire` +
//! `simba_lock_release`), same process, same client, same name, interleaved
//! rounds; prints the median of each, the median of the per-round ratios
//! (each round times both loops back to back, so a slow spell of the server or
//! of the machine hits both alike) and the pooled ratio.
//!
//! cargo run --release --offline --example bench -- [URL] [CYCLES] [ROUNDS]
//! URL defaults to $SIMBA_TEST_REDIS_URL, then memory://bench; CYCLES per
//! round (default 300), ROUNDS (default 21). With SIMBA_BENCH_AA=1 the
//! "binding" side runs the C loop too: the ratio printed is then the noise
//! floor of this machine and server (an A/A run).
use std::ffi::CString;
use std::time::{Duration, Instant};

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let url = args
        .first()
        .cloned()
        .or_else(|| std::env::var("SIMBA_TEST_REDIS_URL").ok())
        .unwrap_or_else(|| "memory://bench".into());
    let cycles: i64 = args.get(1).map_or(Ok(300), |s| s.parse())?;
    let rounds: usize = args.get(2).map_or(Ok(21), |s| s.parse())?;
    if !simba::sys::HAS_C_GLUE {
        return Err("simba-sys was built without its C glue (no C compiler): no raw C baseline".into());
    }

    let client = simba::Client::open(&url)?;
    client.wait_live(Duration::from_secs(10))?;
    let name = format!("bench.lock.{}", std::process::id());
    let cname = CString::new(name.clone())?;
    let timeout = Duration::from_secs(5);

    let aa = std::env::var_os("SIMBA_BENCH_AA").is_some_and(|v| v == "1");
    let binding_round = || -> Result<f64, Box<dyn std::error::Error>> {
        let t0 = Instant::now();
        if aa {
            let rc = unsafe { simba::sys::simba_sys_glue_lock_cycles(client.as_raw(), cname.as_ptr(), cycles, 5000) };
            if rc < 0 {
                return Err(format!("C loop failed: code {rc}").into());
            }
        } else {
            for _ in 0..cycles {
                client.lock(&name, timeout)?.unlock()?;
            }
        }
        Ok(t0.elapsed().as_nanos() as f64 / cycles as f64)
    };
    let c_round = || -> Result<f64, String> {
        let ns = unsafe { simba::sys::simba_sys_glue_lock_cycles(client.as_raw(), cname.as_ptr(), cycles, 5000) };
        if ns < 0 {
            return Err(format!("C loop failed: code {ns}"));
        }
        Ok(ns as f64 / cycles as f64)
    };

    // Warm-up: connections, caches, the lease record.
    binding_round()?;
    c_round()?;
    let (mut rs, mut cs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..rounds {
        // Alternate which goes first, so drift of the server hits both alike.
        let (r, c) = if i % 2 == 0 {
            let r = binding_round()?;
            (r, c_round()?)
        } else {
            let c = c_round()?;
            (binding_round()?, c)
        };
        rs.push(r);
        cs.push(c);
        ratios.push(r / c);
    }
    let pooled = rs.iter().sum::<f64>() / cs.iter().sum::<f64>();
    let (r, c, ratio) = (median(&mut rs), median(&mut cs), median(&mut ratios));
    println!("backend         {url}{}", if aa { "   (A/A: C against C)" } else { "" });
    println!("cycles x rounds {cycles} x {rounds}");
    println!("rust binding    {:.1} us/cycle (median of rounds)", r / 1000.0);
    println!("raw C loop      {:.1} us/cycle (median of rounds)", c / 1000.0);
    println!("ratio           {ratio:.3} median of per-round ratios, {pooled:.3} pooled (target <= 1.05)");
    client.close()?;
    Ok(())
}
