package io.simba;

/** Receiver of the C trampolines; each subclass overrides what it receives. Internal. */
abstract class Upcall {
  void elected(long term) {}

  void revoked(long term, int reason) {}

  void done(int err) {}

  void work(long term) {}

  void locked(int err, long term) {}

  void refused(int err, String detail) {}

  void event(int type, String json) {}

  void observed(String name, String session, String client, long token) {}
}
