package io.simba;

import static io.simba.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Two JVMs on one backend: the leader's stop hands the lease over only after its work exited. */
class HandoverTest {
  @Test
  void handoverBetweenTwoJvms() throws Exception {
    assumeNetworked();
    assumeBackend();
    String n = name("jvm");
    ProcessBuilder pb = new ProcessBuilder(System.getProperty("simba.test.java", "java"), "-Xcheck:jni",
        "-Dsimba.jni.library=" + System.getProperty("simba.jni.library"), "-cp",
        System.getProperty("simba.test.classpath"), "io.simba.HandoverChild", URL, n,
        Long.toString(LEASE.toMillis()));
    pb.redirectErrorStream(true);
    Process child = pb.start();
    BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    BlockingQueue<Long> childAt = new LinkedBlockingQueue<>();
    StringBuffer other = new StringBuffer();
    Thread reader = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8))) {
        String l;
        while ((l = r.readLine()) != null) {
          if (l.matches("(LEADER \\d+|INTERRUPTED|EXITED \\d+|CLOSED)")) {
            lines.add(l);
            childAt.add(System.nanoTime());
          } else {
            other.append(l).append('\n'); // the child's log lines
          }
        }
      } catch (Exception e) {
        lines.add("READ ERROR " + e);
      }
    });
    reader.setDaemon(true);
    reader.start();
    try (Simba s = open()) {
      String first = take(lines);
      assertTrue(first.startsWith("LEADER "), first);
      take(childAt);
      long childToken = Long.parseLong(first.substring(7));
      BlockingQueue<Long> elected = new LinkedBlockingQueue<>();
      BlockingQueue<Long> electedAt = new LinkedBlockingQueue<>();
      Election e = s.election(n).start(t -> {
        electedAt.add(System.nanoTime());
        elected.add(t.token());
      });
      assertNull(elected.poll(LEASE.toMillis(), TimeUnit.MILLISECONDS), "not elected while the child leads");
      try (OutputStream out = child.getOutputStream()) {
        out.write("stop\n".getBytes(StandardCharsets.UTF_8));
      }
      assertEquals("INTERRUPTED", take(lines));
      take(childAt);
      String exited = take(lines);
      assertTrue(exited.startsWith("EXITED "), exited);
      take(childAt);
      long exitedAt = Long.parseLong(exited.substring(7)); // the child's System.nanoTime(), same clock
      long token = take(elected);
      assertTrue(token > childToken, token + " > " + childToken);
      assertTrue(take(electedAt) >= exitedAt, "elected only after the child's work exited");
      assertEquals("CLOSED", take(lines));
      assertTrue(child.waitFor(WAIT.toMillis(), TimeUnit.MILLISECONDS));
      assertEquals(0, child.exitValue());
      get(e.stop());
    } finally {
      child.destroyForcibly();
    }
    String rest = other.toString();
    assertFalse(rest.contains("WARNING in native method") || rest.contains("WARNING: JNI"), rest);
  }
}
