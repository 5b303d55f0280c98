package io.simba;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.simba.example.Ledger;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The README's program works (on every backend). */
class ExampleTest {
  @Test
  void readmeExampleSettlesBatches() throws Exception {
    TestSupport.assumeBackend();
    String url = TestSupport.URL;
    long settled = Ledger.run(url, Duration.ofMillis(800));
    assertTrue(settled > 5, "settled " + settled);
  }
}
