//! Leader work by hand: run this in two terminals on the same backend and
//! name, stop one with Enter (clean handover) or Ctrl-C (failover after the
//! lease), and watch the other take over with a higher fencing token.
//!
//! cargo run --offline --example leader -- [URL] [NAME]
//! URL defaults to $SIMBA_TEST_REDIS_URL, then memory://leader.
use std::time::Duration;

fn main() -> Result<(), simba::Error> {
    let mut args = std::env::args().skip(1);
    let url =
        args.next().or_else(|| std::env::var("SIMBA_TEST_REDIS_URL").ok()).unwrap_or_else(|| "memory://leader".into());
    let name = args.next().unwrap_or_else(|| "demo.leader".into());

    let mut cfg = simba::Config::new();
    cfg.lease_duration(Duration::from_secs(3))?.client_name(&format!("leader-{}", std::process::id()))?;
    let client = simba::Client::open_with(&url, &cfg)?;
    client.on_event(|ev| eprintln!("session: {:?} {}", ev.kind, ev.detail_json))?;

    let task = client.run_while_leader(&name, |term| {
        println!("leading {} with token {}", term.name(), term.token());
        // One step a second, each checked against the term and fenced by its token.
        while term.ensure_valid(Duration::from_millis(500)).is_ok() {
            println!("  step with token {} ({:?} left)", term.token(), term.remaining());
            if term.wait_revoked(Duration::from_secs(1)).unwrap_or(true) {
                break;
            }
        }
        println!("revoked: {:?}", term.revoke_reason());
    })?;
    println!("contending for {name} on {url}; press Enter to stop");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    task.close()?; // revokes the term, waits for the work, then releases the lease
    client.close()
}
