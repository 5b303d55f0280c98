#include "engine/group.h"

#include <algorithm>
#include <random>

#include "core/names.h"
#include "core/partition_share.h"
#include "engine/term.h"

namespace simba::engine {

namespace {
constexpr uint32_t kMaxPartitions = 10000;
}  // namespace

Result Group::join(const std::shared_ptr<Client>& client, const std::string& group,
                   uint32_t partitions, WorkFn work, std::shared_ptr<Group>* out) {
  if (partitions == 0 || partitions > kMaxPartitions) {
    return {Code::kEInval,
            "simba_group_join: partitions must be 1.." + std::to_string(kMaxPartitions)};
  }
  std::shared_ptr<Group> g(new Group(client, group, partitions, std::move(work)));
  // The longest names it will use must follow the lease-name rule too.
  for (const std::string& name :
       {g->partition_name(partitions - 1), g->slot_name(partitions - 1)}) {
    const std::string why = check_lease_name(name);
    if (!why.empty()) {
      return {Code::kEInval, "simba_group_join: group \"" + group + "\" makes the lease name \"" +
                                 name + "\": " + why};
    }
  }
  if (client->close_requested()) return {Code::kEClosed, "the client is closed"};
  try {
    g->thread_ = std::thread([g] { g->run(); });
  } catch (const std::system_error& e) {
    return {Code::kENoMem, std::string("cannot start the group's thread: ") + e.what()};
  }
  *out = std::move(g);
  return Result::ok();
}

Group::Group(std::shared_ptr<Client> client, std::string group, uint32_t partitions, WorkFn work)
    : client_(std::move(client)),
      group_(std::move(group)),
      n_(partitions),
      work_(std::move(work)),
      queue_(client_->callback_queue()) {}

Group::~Group() {
  if (thread_.joinable()) {
    // The manager thread may hold the last reference: it cannot join itself.
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();
    } else {
      thread_.join();
    }
  }
}

Result Group::stop(DoneFn done) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_requested_) {
    return {Code::kEState, "the group \"" + group_ + "\" is already stopping or stopped"};
  }
  stop_requested_ = true;
  stop_done_ = std::move(done);
  cv_.notify_all();
  return Result::ok();
}

Result Group::step_down(Duration cooldown, DoneFn done) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_requested_) {
    return {Code::kEState, "the group \"" + group_ + "\" is stopping or stopped"};
  }
  step_down_requested_ = true;
  step_down_cooldown_ = std::max(step_down_cooldown_, cooldown);
  step_down_dones_.push_back(std::move(done));
  cv_.notify_all();
  return Result::ok();
}

void Group::close() {
  stop(nullptr);                            // Code::kEState when already stopping: fine
  if (!client_->may_close_block()) return;  // the manager finishes on its own
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
    // The manager's leave() waits for the loop: in EXTERNAL mode on the host
    // thread, drive the loop until the manager is done, then join.
    client_->wait_for(manager_exited_);
    thread_.join();
  }
  for (const auto& e : elections_) e->wait_for_work();
  // The dones go through the callback executor: wait until the last one ran,
  // so that none runs after the close returned.
  auto w = std::make_shared<Waiter>();
  if (queue_->post([w] { w->finish(Code::kOk); })) client_->wait_for(*w);
}

void Group::close_async(LastFn last) {
  stop(nullptr);  // Code::kEState when already stopping: fine
  // Waiting is the manager's and the work's business, not the caller's (a
  // callback, leader work): a short-lived thread waits, as close() would.
  std::thread([self = shared_from_this(), last = std::move(last)]() mutable {
    {
      std::unique_lock<std::mutex> lock(self->manager_exited_.mu);
      self->manager_exited_.cv.wait(lock, [&] { return self->manager_exited_.done; });
    }
    // The manager exited: elections_ is this thread's to read now.
    for (const auto& e : self->elections_) e->wait_for_work();
    run_last(*self->queue_, std::move(last));  // after the stop's done on the same queue
  }).detach();
}

void Group::run() {
  std::mt19937_64 rng(std::random_device{}());
  for (;;) {
    std::vector<DoneFn> step_down_dones;
    Duration cooldown{0};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_requested_) break;
      if (step_down_requested_) {
        step_down_requested_ = false;
        step_down_dones.swap(step_down_dones_);
        cooldown = step_down_cooldown_;
        step_down_cooldown_ = Duration(0);
      }
    }
    if (!step_down_dones.empty()) {
      leave();
      for (auto& done : step_down_dones) deliver(std::move(done));
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, cooldown, [this] { return stop_requested_; });
      continue;
    }
    if (ensure_member_slot()) round();
    // About one renew interval between rounds, jittered so members interleave.
    const int64_t period = to_ms(client_->config().renew_interval());
    std::uniform_int_distribution<int64_t> jitter(period * 3 / 4, period * 5 / 4);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(1, jitter(rng))),
                 [this] { return stop_requested_ || step_down_requested_; });
  }
  leave();
  DoneFn done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    done = std::move(stop_done_);
  }
  deliver(std::move(done));
  manager_exited_.finish(Code::kOk);
  client_->wake_loop();
}

void Group::deliver(DoneFn done) {
  if (!done) return;
  // A queue closed by the client's close runs nothing more: after
  // simba_client_close returned, no callback of the client runs.
  queue_->post([done = std::move(done)] { done(Code::kOk); });
}

// Holds one member lock, GROUP.member.K: the lowest free K. False while this
// member has none (more members than partitions, or the session is down).
bool Group::ensure_member_slot() {
  if (slot_ && slot_->valid()) return true;
  if (slot_) {
    // Its session ended: every partition term of it ended too.
    release_slot();
  }
  if (client_->status() != SessionStatus::kLive) return false;
  for (uint32_t k = 0; k < n_; ++k) {
    Term* t = nullptr;
    const Result r = client_->lock_acquire(slot_name(k), 0, /*try_once=*/true, &t);
    if (r.code == Code::kOk) {
      slot_ = t;
      slot_index_ = k;
      return true;
    }
    if (r.code == Code::kEClosed) {
      std::lock_guard<std::mutex> lock(mu_);
      stop_requested_ = true;
      return false;
    }
  }
  return false;
}

void Group::round() {
  // Forget elections that are over (stopped, work returned).
  elections_.erase(std::remove_if(elections_.begin(), elections_.end(),
                                  [this](const ElectionRef& e) {
                                    if (!e->finished()) return false;
                                    client_->detach_election(e);
                                    return true;
                                  }),
                   elections_.end());
  std::vector<std::string> names;
  for (uint32_t i = 0; i < n_; ++i) names.push_back(slot_name(i));
  for (uint32_t i = 0; i < n_; ++i) names.push_back(partition_name(i));
  InspectReply reply;
  std::string own;
  const Result r = client_->inspect(names, to_ms(client_->config().renew_interval()), &reply, &own);
  if (r.code == Code::kEClosed) {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_ = true;
    return;
  }
  if (r.code != Code::kOk || own.empty()) return;  // next round
  std::map<std::string, std::string> holder;
  for (const LeaseInfo& l : reply.leases) holder[l.name] = l.holder;

  // The share rule (ADR 0012) is core/partition_share: every member computes
  // the same split from the same read.
  PartitionRead read;
  read.own = own;
  read.own_slot = slot_index_;
  for (uint32_t k = 0; k < n_; ++k) read.slot_holders.push_back(holder[slot_name(k)]);
  for (uint32_t i = 0; i < n_; ++i) read.partition_holders.push_back(holder[partition_name(i)]);
  std::set<uint32_t> pursued;
  for (const auto& [i, e] : pursued_) pursued.insert(i);
  const PartitionPlan plan = plan_partitions(read, pursued, handing_over_);
  if (plan.stale) return;
  for (uint32_t i : plan.handed_over) handing_over_.erase(i);  // it may be pursued again
  for (uint32_t i : plan.lost) stop_pursuing(i);  // another member won it (or took it over)
  for (uint32_t i : plan.hand_over) hand_over(i);
  for (uint32_t i : plan.withdraw) stop_pursuing(i);
  size_t want = plan.want;
  for (size_t j = 0; j < plan.candidates.size() && want > 0; ++j) {
    const uint32_t i = plan.candidates[j];
    ElectionRef e;
    const Result s = client_->start_election(partition_name(i), Listener{}, &e, work_);
    if (s.code != Code::kOk) continue;  // still stopping from an earlier term: next round
    pursued_[i] = e;
    elections_.push_back(e);
    --want;
  }
}

void Group::stop_pursuing(uint32_t partition) {
  auto it = pursued_.find(partition);
  if (it == pursued_.end()) return;
  client_->stop_election(it->second, nullptr);
  pursued_.erase(it);
}

void Group::hand_over(uint32_t partition) {
  if (!pursued_.count(partition)) return;
  stop_pursuing(partition);
  handing_over_.insert(partition);
}

void Group::leave() {
  // All stops first, so the handovers (each waiting for its work) overlap.
  for (const auto& e : elections_) client_->stop_election(e, nullptr);
  for (const auto& e : elections_) client_->stop_election_wait(e, -1);
  pursued_.clear();
  handing_over_.clear();
  if (slot_) release_slot();
}

// Frees the member lock and drops this group's reference to its term.
void Group::release_slot() {
  client_->lock_release(slot_);
  slot_->release();
  slot_ = nullptr;
}

}  // namespace simba::engine
