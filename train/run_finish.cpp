// TrainingRun's last phase: the checkpoints it saves (at the interval, at the end, or a
// rescue copy when --out cannot be written) and how it ends (training_run.h).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "base/shell_quote.h"
#include "io/files.h"
#include "io/tokenizer_section.h"
#include "train/console.h"
#include "train/launcher_stop.h"
#include "train/stop_reason.h"
#include "train/stop_signals.h"
#include "train/task.h"
#include "train/training_run.h"

namespace train {

std::string TrainingRun::continue_command(const std::string& checkpoint) const {
  std::vector<std::string> words = {cfg_.program, "resume", "--checkpoint", checkpoint};
  if (checkpoint != cfg_.out) words.insert(words.end(), {"--out", cfg_.out});
  if (!cfg_.metrics.empty()) words.insert(words.end(), {"--metrics", cfg_.metrics});
  if (!cfg_.report.empty()) words.insert(words.end(), {"--report", cfg_.report});
  if (!cfg_.report_prompt.empty())
    words.insert(words.end(), {"--report-prompt", cfg_.report_prompt});
  for (std::string& w : words) w = base::shell_quote(w);
  return fmt::format("{}", fmt::join(words, " "));
}

void TrainingRun::print_continue_command(const std::string& checkpoint) const {
  if (world_.root())
    noticef("attograd: continue this run with: {}\n", continue_command(checkpoint));
}

// ------------------------------------------------------------------ saving and the finish
void TrainingRun::save(int64_t at, const std::string& path) {
  if (!world_.root()) return;  // every rank holds the same state; rank 0 writes it
  io::Checkpoint c;
  c.config = cfg_.to_json();
  c.step = at;
  c.model = model_->named_parameters();
  c.tokenizer = io::tokenizer_section(*data_.tokenizer);
  c.data_identity = data_.identity;
  engine_->record(c);
  if (watch_) watch_->record(c);
  c.run_id = report_->identity().id;
  c.run_name = report_->identity().name;
  c.history = io::history_text(report_->history());
  // under mpirun, whose stop kills this process a second after its signal, the save is made
  // by a process that the kill misses (launcher_stop.h)
  if (world_.launched()) return save_outliving_this_process(path, c);
  io::save_checkpoint(path, c);
}

// A failed periodic save (full disk, folder gone) loses nothing: the run goes on with its
// state in memory and tries again at the next interval.
void TrainingRun::save_periodically() {
  try {
    save(progress_.step, cfg_.out);
    progress_.last_saved = progress_.step;
  } catch (const io::CheckpointError& e) {
    warn(fmt::format("step {}: {}; training continues and tries again at step {} ({})",
                     progress_.step, e.what(), progress_.step + cfg_.checkpoint_interval,
                     progress_.last_saved >= 0
                         ? fmt::format("last good checkpoint: step {}", progress_.last_saved)
                         : std::string("no checkpoint written yet")));
  }
}

void TrainingRun::print_profile() const {
  const int64_t steps = progress_.step - (resumed_ ? resumed_->step : 0);
  if (!cfg_.profile || steps <= 0) return;
  const double per_step = 1e3 * progress_.step_seconds / static_cast<double>(steps);
  sayf("profile: {} steps, {:.2f} ms/step (forward, backward, reduction, update){}\n", steps,
       per_step, engine_->reduction_profile(per_step, steps));
}

int TrainingRun::finish() {
  print_profile();
  if (!ending_.damaged_data.empty()) return finish_on_damaged_data();
  const bool stopped = StopSignals::requested() || ending_.agreed_stop;
  if (stopped && world_.root())
    noticef("{}attograd: {}: stopping after step {}; saving {}\n", report_->fresh_line(),
            ending_.agreed_stop ? ending_.agreed_stop_reason : stop_reason(world_.distributed()),
            progress_.step, cfg_.out);
  if (ending_.failed) {
    notify(true);  // the curves up to the stop
    return 1;
  }
  if (!ending_.early_stop.empty()) {
    sayf("{}attograd: early stopping: {}; stopping after step {} of {}; saving {}\n",
         report_->fresh_line(), ending_.early_stop, progress_.step, cfg_.steps, cfg_.out);
    report_->stop(progress_.step, "early stopping: " + ending_.early_stop);
  }
  save_final();
  if (progress_.step < cfg_.steps && (stopped || ending_.interrupted || cfg_.stop_at > 0))
    print_continue_command(cfg_.out);
  if (!std::isnan(progress_.last_val) && data_.ideal_loss >= 0)
    sayf("val loss {:.4f}, {:.4f} above the corpus floor {:.4f}\n", progress_.last_val,
         progress_.last_val - data_.ideal_loss, data_.ideal_loss);
  const bool ended = progress_.step == cfg_.steps || !ending_.early_stop.empty();
  if (cfg_.sample_tokens > 0 && ended && !StopSignals::requested()) print_closing_sample();
  notify(true);
  return stopped ? stopped_exit_code() : 0;  // saved, but not the run asked for
}

void TrainingRun::save_final() {
  if (progress_.last_saved == progress_.step && resumed_ && progress_.step == resumed_->step) {
    sayf("no step was trained (the run is at step {} of {}): {} is unchanged\n", progress_.step,
         cfg_.steps, cfg_.out);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  if (progress_.last_saved != progress_.step) {
    const SavedTo saved = save_or_rescue(progress_.step);
    if (saved.path != cfg_.out)
      throw std::runtime_error(
          fmt::format("{}; the run's state (step {}) was saved to {} instead; continue this run "
                      "with: {}",
                      saved.out_error, progress_.step, saved.path, continue_command(saved.path)));
  }
  // a long save is worth knowing of (under mpirun a save after the last step is still in
  // this process, which the launcher's stop kills one odls_base_sigkill_timeout later)
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  say(saved_line(progress_.step, seconds));
}

std::string TrainingRun::saved_line(int64_t at, double seconds) const {
  return fmt::format("saved checkpoint {} (step {}{})\n", cfg_.out, at,
                     seconds >= 1 ? fmt::format("; the save took {:.1f} s", seconds) : "");
}

TrainingRun::SavedTo TrainingRun::save_or_rescue(int64_t at) {
  try {
    save(at, cfg_.out);
    return {cfg_.out, ""};
  } catch (const io::CheckpointError& e) {
    // the run's state is still in memory: keep it somewhere before giving up
    std::string rescue;
    try {
      rescue = io::make_rescue_path(cfg_.out);
      save(at, rescue);
    } catch (const std::exception& e2) {
      // the folder was made for this copy alone: a failed save leaves it empty, and an empty
      // private folder in /tmp for every failed run is litter nobody can use
      if (!rescue.empty()) ::rmdir(std::filesystem::path(rescue).parent_path().c_str());
      throw std::runtime_error(
          fmt::format("{}; the rescue copy failed too: {}", e.what(), e2.what()));
    }
    return {rescue, e.what()};
  }
}

// Damaged data met by any rank: the last completed step is saved (to --out, else a rescue
// folder), one line says what was damaged and where the run is, and every rank exits 1.
int TrainingRun::finish_on_damaged_data() {
  std::string saved;
  if (progress_.last_saved == progress_.step) {
    saved = fmt::format("step {}, the last completed, is saved in {}", progress_.step, cfg_.out);
  } else {
    try {
      const SavedTo to = save_or_rescue(progress_.step);
      saved = to.path == cfg_.out
                  ? fmt::format("saved step {}, the last completed, to {}", progress_.step, to.path)
                  : fmt::format("{}; saved step {}, the last completed, to {} instead",
                                to.out_error, progress_.step, to.path);
    } catch (const std::exception& e) {
      saved = fmt::format("nothing saved: {}", e.what());
    }
  }
  if (world_.root())
    noticef("{}attograd: error: {}; {}\n", report_->fresh_line(), ending_.damaged_data, saved);
  notify(true);  // the curves up to the stop
  return 1;
}

void TrainingRun::print_closing_sample() {
  const std::optional<TaskSample> sample = cfg_.task->closing_sample(*model_, cfg_, data_);
  if (!sample) return;
  sayf("{}:\n{}\n", sample->heading, sample->text);
  report_->sample(progress_.step, sample->text);
}

}  // namespace train
