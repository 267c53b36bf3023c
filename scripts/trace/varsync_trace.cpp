// varsync-trace: merges the flight recorders of a strategy's processes
// (rule M7: each process's to_json(s.stats()), e.g. its metrics endpoint's
// /flight) into one report that says who is where.
//
//   varsync-trace [--processes N] FILE|DIR...
//
// A directory is one written by the processes' automatic dumps (rule M8,
// strategy_options::flight_dump_dir): of its flight.<rank>.<reason>.json
// files, the latest of each process is read.
//
// Operations line up across processes by their key: in services mode the
// sequencer's number, in training mode this process's operation number
// (every process issues the same operations in one order, P4). A process's
// place is its oldest unanswered operation, or the last it finished. The
// process whose place is earliest is the one the others wait for; a
// process of 0..N-1 with no dump is named too (a stopped or lost process
// cannot answer). Exit status: 0 when every process is idle, 1 when some
// operation is unanswered, 2 on bad input.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

struct op {
  uint64_t key = 0;
  std::string kind, variable, phase, error;
  int origin = 0;
  uint64_t epoch = 0;
  int64_t age_us = 0;
};

struct process_view {
  int rank = 0;
  std::optional<op> waiting; // oldest unanswered
  std::optional<op> last;    // last answered
  bool services = false;
  /// Services mode: calls issued here, not back from the sequencer yet.
  int sequencing = 0;
  /// M8: why the dump was written (empty: asked for) and what said so.
  std::string reason, detail;
};

std::string describe(const op& o) {
  std::string out = "#" + std::to_string(o.key) + " " + o.kind;
  out += "(" + o.variable + ")";
  if (o.origin >= 0)
    out += " from process " + std::to_string(o.origin);
  if (o.epoch > 0) // P16: the lead that ordered it
    out += " (epoch " + std::to_string(o.epoch) + ")";
  return out;
}

std::string ms(int64_t us) {
  std::ostringstream s;
  s.precision(us >= 10000 ? 0 : 1);
  s << std::fixed << static_cast<double>(us) / 1000.0 << " ms";
  return s.str();
}

// One dump; throws std::runtime_error naming the file on bad input.
process_view read_dump(const std::string& path) {
  std::ifstream in{path};
  if (!in)
    throw std::runtime_error(path + ": cannot be read");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": not JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("process") || !j.contains("operations")
      || !j["operations"].is_array())
    throw std::runtime_error(path + ": not a flight recorder dump (expected "
                                    "{\"process\", \"operations\": [...]})");
  process_view v;
  v.rank = j["process"].get<int>();
  v.reason = j.value("reason", "");
  v.detail = j.value("detail", "");
  for (auto& r : j["operations"])
    if (r.value("sequence", 0) > 0)
      v.services = true;
  for (auto& r : j["operations"]) {
    op o;
    const uint64_t seq = r.value("sequence", uint64_t{0});
    // Services mode: only the operations run in their turn line up.
    if (v.services && seq == 0) {
      if (r.value("phase", "") == "sequencing")
        ++v.sequencing;
      continue;
    }
    o.key = v.services ? seq : r.value("id", uint64_t{0});
    o.kind = r.value("kind", "");
    o.variable = r.value("variable", "");
    o.phase = r.value("phase", "");
    o.error = r.value("error", "");
    o.origin = r.value("origin", -1);
    o.epoch = r.value("epoch", uint64_t{0});
    o.age_us = r.value("age_us", int64_t{0});
    // Unanswered: queued, sequencing, running, or a round's stage.
    if (o.phase != "done" && o.phase != "failed") {
      if (!v.waiting || o.key < v.waiting->key)
        v.waiting = o;
    } else if (!v.last || o.key > v.last->key) {
      v.last = o;
    }
  }
  return v;
}

// M8: the latest automatic dump of each process in `dir` (by the time
// each says it was written).
std::vector<std::string> dumps_in(const std::string& dir) {
  std::map<int, std::pair<int64_t, std::string>> latest;
  for (auto& e : std::filesystem::directory_iterator{dir}) {
    const auto name = e.path().filename().string();
    int rank = -1;
    char reason[32];
    if (std::sscanf(name.c_str(), "flight.%d.%31[a-z].json", &rank, reason)
          != 2
        || name.size() < 5 || name.compare(name.size() - 5, 5, ".json") != 0)
      continue;
    std::ifstream in{e.path()};
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      throw std::runtime_error(e.path().string() + ": not JSON");
    const auto when = j.value("unix_ms", int64_t{0});
    auto [at, fresh] = latest.try_emplace(rank, when, e.path().string());
    if (!fresh && when > at->second.first)
      at->second = {when, e.path().string()};
  }
  if (latest.empty())
    throw std::runtime_error(dir + ": holds no flight.<rank>.<reason>.json");
  std::vector<std::string> out;
  for (auto& [rank, found] : latest)
    out.push_back(found.second);
  return out;
}

// Prints where each process is; returns the key of the earliest unanswered
// operation, if any process waits.
std::optional<uint64_t> print_places(const std::map<int, process_view>& views) {
  std::optional<uint64_t> earliest;
  for (auto& [rank, v] : views) {
    if (!v.reason.empty())
      std::cout << "process " << rank << ": dumped on " << v.reason
                << (v.detail.empty() ? "" : " (" + v.detail + ")") << "\n";
    if (v.waiting) {
      std::cout << "process " << rank << ": at " << describe(*v.waiting)
                << ", " << v.waiting->phase << " for "
                << ms(v.waiting->age_us) << "\n";
      if (!earliest || v.waiting->key < *earliest)
        earliest = v.waiting->key;
    } else if (v.last) {
      std::cout << "process " << rank << ": idle after " << describe(*v.last)
                << " (" << v.last->phase
                << (v.last->error.empty() ? "" : ": " + v.last->error)
                << ")\n";
    } else {
      std::cout << "process " << rank << ": no operations recorded\n";
    }
    if (v.sequencing > 0)
      std::cout << "process " << rank << ": " << v.sequencing
                << " call(s) issued here wait for the sequencer\n";
  }
  return earliest;
}

int run(int argc, char** argv) {
  int expected = 0;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--processes" && i + 1 < argc) {
      expected = std::stoi(argv[++i]);
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: varsync-trace [--processes N] FILE|DIR...\n";
      return 0;
    } else if (std::filesystem::is_directory(a)) {
      for (auto& f : dumps_in(a))
        files.push_back(f);
    } else {
      files.push_back(a);
    }
  }
  if (files.empty())
    throw std::runtime_error("no dump given (usage: varsync-trace "
                             "[--processes N] FILE...)");
  std::map<int, process_view> views;
  for (auto& f : files) {
    auto v = read_dump(f);
    if (views.count(v.rank) > 0)
      throw std::runtime_error(f + ": a second dump of process "
                               + std::to_string(v.rank));
    views[v.rank] = std::move(v);
  }
  const auto earliest = print_places(views);
  const bool any_waiting = earliest.has_value();
  std::vector<int> missing;
  for (int r = 0; r < expected; ++r)
    if (views.count(r) == 0)
      missing.push_back(r);
  for (auto r : missing)
    std::cout << "process " << r
              << ": no dump (stopped, lost, or not asked)\n";
  if (!any_waiting) {
    std::cout << "summary: every process that answered is idle\n";
    return missing.empty() ? 0 : 1;
  }
  // Who holds the others up: those idle before the earliest unanswered
  // operation never reached it; else those waiting at it.
  std::vector<int> behind, waiting_at;
  for (auto& [rank, v] : views) {
    if (v.waiting && v.waiting->key == *earliest)
      waiting_at.push_back(rank);
    else if (!v.waiting && (!v.last || v.last->key < *earliest))
      behind.push_back(rank);
  }
  auto list = [](const std::vector<int>& xs) {
    std::string out;
    for (size_t i = 0; i < xs.size(); ++i)
      out += (i == 0 ? "" : i + 1 == xs.size() ? " and " : ", ")
             + std::to_string(xs[i]);
    return out;
  };
  std::cout << "summary: ";
  if (!behind.empty() || !missing.empty()) {
    auto culprits = behind;
    culprits.insert(culprits.end(), missing.begin(), missing.end());
    std::cout << "process" << (culprits.size() > 1 ? "es " : " ")
              << list(culprits) << (culprits.size() > 1 ? " have" : " has")
              << " not reached #" << *earliest << "; ";
  }
  std::cout << "process" << (waiting_at.size() > 1 ? "es " : " ")
            << list(waiting_at) << (waiting_at.size() > 1 ? " wait" : " waits")
            << " at #" << *earliest << "\n";
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "varsync-trace: " << e.what() << "\n";
    return 2;
  }
}
