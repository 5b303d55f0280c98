#include "engine/group.h"

#include <algorithm>
#include <random>

#include "core/names.h"
#include "engine/term.h"

namespace simba::engine {

namespace {
constexpr uint32_t kMaxPartitions = 10000;
}  // namespace

Result Group::join(const std::shared_ptr<Client>& client, const std::string& group,
                   uint32_t partitions, WorkFn work, std::shared_ptr<Group>* out) {
  if (partitions == 0 || partitions > kMaxPartitions) {
    return {kEInval, "simba_group_join: partitions must be 1.." + std::to_string(kMaxPartitions)};
  }
  std::shared_ptr<Group> g(new Group(client, group, partitions, std::move(work)));
  // The longest names it will use must follow the lease-name rule too.
  for (const std::string& name : {g->partition_name(partitions - 1), g->slot_name(partitions - 1)}) {
    const std::string why = check_lease_name(name);
    if (!why.empty()) {
      return {kEInval, "simba_group_join: group \"" + group + "\" makes the lease name \"" +
                           name + "\": " + why};
    }
  }
  if (client->close_requested()) return {kEClosed, "the client is closed"};
  try {
    g->thread_ = std::thread([g] { g->run(); });
  } catch (const std::system_error& e) {
    return {kENoMem, std::string("cannot start the group's thread: ") + e.what()};
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
  if (stop_requested_) return {kEState, "the group \"" + group_ + "\" is already stopping or stopped"};
  stop_requested_ = true;
  stop_done_ = std::move(done);
  cv_.notify_all();
  return Result::ok();
}

Result Group::step_down(Duration cooldown, DoneFn done) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_requested_) return {kEState, "the group \"" + group_ + "\" is stopping or stopped"};
  step_down_requested_ = true;
  step_down_cooldown_ = std::max(step_down_cooldown_, cooldown);
  step_down_dones_.push_back(std::move(done));
  cv_.notify_all();
  return Result::ok();
}

void Group::close() {
  stop(nullptr);  // kEState when already stopping: fine
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
  if (queue_->post([w] { w->finish(kOk); })) client_->wait_for(*w);
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
  manager_exited_.finish(kOk);
  client_->wake_loop();
}

void Group::deliver(DoneFn done) {
  if (!done) return;
  // A queue closed by the client's close runs nothing more: after
  // simba_client_close returned, no callback of the client runs.
  queue_->post([done = std::move(done)] { done(kOk); });
}

// Holds one member lock, GROUP.member.K: the lowest free K. False while this
// member has none (more members than partitions, or the session is down).
bool Group::ensure_member_slot() {
  if (slot_ && slot_->state->valid()) return true;
  if (slot_) {
    // Its session ended: every partition term of it ended too.
    release_slot();
  }
  if (client_->status() != SessionStatus::kLive) return false;
  for (uint32_t k = 0; k < n_; ++k) {
    simba_term* t = nullptr;
    const Result r = client_->lock_acquire(slot_name(k), 0, /*try_once=*/true, &t);
    if (r.code == kOk) {
      slot_ = t;
      slot_index_ = k;
      return true;
    }
    if (r.code == kEClosed) {
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
                                  [this](const std::shared_ptr<Election>& e) {
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
  const Result r =
      client_->inspect(names, to_ms(client_->config().renew_interval()), &reply, &own);
  if (r.code == kEClosed) {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_ = true;
    return;
  }
  if (r.code != kOk || own.empty()) return;  // next round
  std::map<std::string, std::string> holder;
  for (const LeaseInfo& l : reply.leases) holder[l.name] = l.holder;

  // Members, by member lock. Each gets ⌊N/m⌋ partitions, and the N mod m that
  // hold the most now (ties: the lower member slot) get one more: every member
  // computes the same split from the same read, and a member that already has
  // ⌈N/m⌉ keeps it, so a join or a leave moves as few partitions as it can.
  std::map<std::string, size_t> holding;  // session -> partitions it holds
  for (uint32_t i = 0; i < n_; ++i) {
    const std::string& h = holder[partition_name(i)];
    if (!h.empty()) ++holding[h];
  }
  std::vector<uint32_t> members;
  for (uint32_t k = 0; k < n_; ++k) {
    if (!holder[slot_name(k)].empty()) members.push_back(k);
  }
  if (holder[slot_name(slot_index_)] != own ||
      std::find(members.begin(), members.end(), slot_index_) == members.end()) {
    return;  // a stale read
  }
  std::stable_sort(members.begin(), members.end(), [&](uint32_t a, uint32_t b) {
    return holding[holder[slot_name(a)]] > holding[holder[slot_name(b)]];
  });
  const uint32_t m = static_cast<uint32_t>(members.size());
  const uint32_t rank = static_cast<uint32_t>(
      std::find(members.begin(), members.end(), slot_index_) - members.begin());
  const uint32_t share = n_ / m + (rank < n_ % m ? 1 : 0);

  std::vector<uint32_t> held, free;
  for (uint32_t i = 0; i < n_; ++i) {
    const std::string& h = holder[partition_name(i)];
    if (h == own) {
      if (pursued_.count(i)) held.push_back(i);
    } else {
      handing_over_.erase(i);  // gone from us: it may be pursued again
      if (h.empty()) {
        free.push_back(i);
      } else if (auto it = pursued_.find(i); it != pursued_.end()) {
        // Another member won it (or took it over): stop contending for it.
        client_->stop_election(it->second, nullptr);
        pursued_.erase(it);
      }
    }
  }
  // Excess: hand the highest-numbered over, in handover order.
  for (size_t excess = held.size() > share ? held.size() - share : 0; excess > 0; --excess) {
    hand_over(held.back());
    held.pop_back();
  }
  // Still contending for more than the share allows (the share dropped as
  // members joined): stop those contests, so they are not won only to be
  // handed straight back.
  for (auto it = pursued_.begin(); it != pursued_.end() && pursued_.size() > share;) {
    if (std::find(held.begin(), held.end(), it->first) != held.end()) {
      ++it;
      continue;
    }
    client_->stop_election(it->second, nullptr);
    it = pursued_.erase(it);
  }
  // Deficit: contend for free partitions, starting at a point that depends on
  // the rank so that members who look at the same free set pick different ones.
  size_t want = share > pursued_.size() ? share - pursued_.size() : 0;
  if (want == 0 || free.empty()) return;
  const size_t start = (static_cast<size_t>(rank) * free.size()) / m;
  for (size_t j = 0; j < free.size() && want > 0; ++j) {
    const uint32_t i = free[(start + j) % free.size()];
    if (pursued_.count(i) || handing_over_.count(i)) continue;
    std::shared_ptr<Election> e;
    const Result s = client_->start_election(partition_name(i), nullptr, nullptr, &e, work_);
    if (s.code != kOk) continue;  // still stopping from an earlier term: next round
    pursued_[i] = e;
    elections_.push_back(e);
    --want;
  }
}

void Group::hand_over(uint32_t partition) {
  auto it = pursued_.find(partition);
  if (it == pursued_.end()) return;
  client_->stop_election(it->second, nullptr);
  pursued_.erase(it);
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
