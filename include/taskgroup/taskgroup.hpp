// taskgroup: the umbrella header. Includes every public header.
#pragma once

#include <taskgroup/async.hpp>
#include <taskgroup/blob.hpp>
#include <taskgroup/builtin_ops.hpp>
#include <taskgroup/codec.hpp>
#include <taskgroup/control.hpp>
#include <taskgroup/error.hpp>
#include <taskgroup/execution_step.hpp>
#include <taskgroup/net.hpp>
#include <taskgroup/node.hpp>
#include <taskgroup/op_library.hpp>
#include <taskgroup/operator.hpp>
#include <taskgroup/plan.hpp>
#include <taskgroup/queue.hpp>
#include <taskgroup/retry_policy.hpp>
#include <taskgroup/run_context.hpp>
#include <taskgroup/run_observer.hpp>
#include <taskgroup/run_options.hpp>
#include <taskgroup/run_probe.hpp>
#include <taskgroup/run_report.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/step_runner.hpp>
#include <taskgroup/task.hpp>
#include <taskgroup/task_group.hpp>
#include <taskgroup/workspace.hpp>
