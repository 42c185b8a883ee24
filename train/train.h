#pragma once
// Training, the map of train/: a RunConfig in, a trained model and its checkpoint out.
//
//   train::RunConfig cfg;                      // config.h: docs/model.md's defaults
//   cfg.steps = 200;
//   int rc = train::run_training(cfg);         // training_run.h
//
//   config.h         RunConfig: model, data and optimiser settings, JSON both ways
//   run_data.h       the text read, tokenized and split (train / val)
//   task.h           what a run trains its model to do, one class per task (tasks/: lm,
//                    classify, instruct; tasks/registry.cpp names them)
//   training_run.h   TrainingRun, the story: set-up, the loop, evaluation, saving, the finish
//   run_schedule.h   --epochs counted into steps; TrainingRun's schedule line, warm-up
//                    warning, ETA from a measured micro-batch, early stopping, best checkpoint
//   validation_watch.h  the task's validation metric watched: best so far, evaluations since
//                    (--early-stopping, --keep-best; kept in /best_validation)
//   step_engine.h    one optimiser step: micro-batches, accumulation, reduction, precision,
//                    clipping fused with the update, stops before a bad update
//   batch_source.h   where a step's micro-batches come from (a task's windows or examples)
//   grad_accumulation.h  micro-batch gradients summed in a fixed binary tree
//   grad_reduction.h the same tree over MPI processes, in buckets overlapping backward
//   world.h          the processes of a run: one, or MPI's under mpirun (mpi_library.h: which MPI)
//   evaluate.h       the evaluation windows and loss (and d loss / d weights)
//   evaluate_examples.h  a fine-tuning task's examples: loss, and a classifier's predictions
//   classification_metrics.h  a classifier's accuracy, per-label precision/recall/F1, confusion
//   multiple_choice.h  multiple-choice items scored by their endings' log-likelihoods
//                    (acc, acc_norm, standard errors), shared out over MPI ranks
//   model_loading.h  a model from a checkpoint, shapes checked first (LoRA adapters merged
//                    for inference; merged_checkpoint folds them into a checkpoint); a
//                    gradient dump refused by name
//   freezing.h       which parameters a run trains (LoRA, --freeze), from names alone
//   memory_plan.h    what a run will need in memory (reading its text included), checked
//                    before it starts; the process's resident memory (/proc/self/status);
//                    the available memory and address space sample checks against
//   reporter.h       progress bar, report lines (mean loss over the interval), --metrics
//                    JSON lines, the run's history rows (kept in its checkpoint)
//   rate_meter.h     tokens/s and ETA from the recent steps, after a warm-up
//   console.h        stdout/stderr that survive a closed terminal or a broken pipe
//   stop_signals.h   SIGINT/TERM/HUP/PIPE end a run after its step, saved (stop_reason.h: named)
//   launcher_stop.h  under mpirun, saves made by a process the launcher's kill misses; at its
//                    stop, the state taken at once (snapshot_gate.h) and saved by that process
#include "train/classification_metrics.h"
#include "train/config.h"
#include "train/console.h"
#include "train/evaluate.h"
#include "train/evaluate_examples.h"
#include "train/freezing.h"
#include "train/grad_accumulation.h"
#include "train/grad_reduction.h"
#include "train/memory_plan.h"
#include "train/model_loading.h"
#include "train/multiple_choice.h"
#include "train/rate_meter.h"
#include "train/reporter.h"
#include "train/run_data.h"
#include "train/run_schedule.h"
#include "train/step_engine.h"
#include "train/stop_signals.h"
#include "train/task.h"
#include "train/training_run.h"
#include "train/validation_watch.h"
#include "train/world.h"
