package io.simba;

/**
 * Membership of a partition group ({@link Simba#group}): partitions {@code GROUP.0} ..
 * {@code GROUP.N-1} are spread over the members, and the work runs for each partition
 * this member leads (the partition is {@link Term#name()}). stepDown leaves the group
 * for the cooldown; stop and close leave it for good, after every partition was
 * handed over.
 */
public final class GroupTask extends LeaderTask {
  private final int partitions;

  GroupTask(Simba simba, String group, int partitions, LeaderWork work) {
    super(simba, group, work);
    this.partitions = partitions;
  }

  /** The number of partitions of the group. */
  public int partitions() {
    return partitions;
  }

  /** The partition number of a term of this group ({@code GROUP.K} gives K). */
  public static int partitionOf(Term term) {
    String n = term.name();
    return Integer.parseInt(n.substring(n.lastIndexOf('.') + 1));
  }
}
