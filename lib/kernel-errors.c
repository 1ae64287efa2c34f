/* lib/kernel-errors.c — errors a model can act on, in the verdict's words.
 * Shared by `ward exec` and `ward serve`: a kernel's error content renamed to
 * the verdict's fields, and the error that stands for a limit when the
 * kernel could not answer at all. */
#include <jansson.h>
#include <stdio.h>

#include "base/util.h"
#include "ward/error.h"
#include "ward/kernel.h"

/* When the kernel could not answer, the verdict says why: say it as an
 * error a model can act on. */
WARD_EXPORT json_t *ward_kernel_limit_error(const struct ward_verdict *v, const struct ward_policy *p)
{
	char hint[256];
	const char *name = "KernelDied";
	switch (v->status) {
	case WARD_STATUS_TIMEOUT:
		name = "TimeoutError";
		snprintf(hint, sizeof(hint), "the sandbox's wall-time limit of %llu ms was reached; "
			 "make the code faster or ask for a longer timeout",
			 (unsigned long long)p->timeout_ms);
		break;
	case WARD_STATUS_CPU_TIMEOUT:
		name = "CPUTimeError";
		snprintf(hint, sizeof(hint), "the sandbox's CPU-time limit of %llu ms was reached",
			 (unsigned long long)p->cpu_time_ms);
		break;
	case WARD_STATUS_MEMORY_LIMIT:
		name = "MemoryError";
		snprintf(hint, sizeof(hint), "the sandbox's memory limit of %llu MiB was reached and "
			 "the kernel was killed; use less memory (e.g. process data in chunks)",
			 (unsigned long long)(p->memory >> 20));
		break;
	case WARD_STATUS_PIDS_LIMIT:
		name = "ProcessLimitError";
		snprintf(hint, sizeof(hint), "the sandbox's process limit of %llu was reached",
			 (unsigned long long)p->pids);
		break;
	case WARD_STATUS_OUTPUT_LIMIT:
		name = "OutputLimitError";
		snprintf(hint, sizeof(hint), "output was truncated at %llu bytes; print less",
			 (unsigned long long)p->output_limit);
		break;
	case WARD_STATUS_KILLED:
		name = "Cancelled";
		snprintf(hint, sizeof(hint), "the execution was cancelled");
		break;
	case WARD_STATUS_SETUP_FAILED:
		if (v->setup.message[0]) {
			/* what stopped the sandbox, as `ward run` says it */
			char what[200];
			name = "SetupError";
			snprintf(hint, sizeof(hint), "the sandbox could not be set up: %s",
				 ward_error_format(&v->setup, what, sizeof(what)));
			break;
		}
		/* fall through */
	default:
		snprintf(hint, sizeof(hint), "the kernel ended (%s)", ward_status_name(v->status));
	}
	return json_pack("{s:s, s:s, s:[], s:s}", "name", name, "value", hint, "traceback",
			 "hint", hint);
}

/* The kernel's error content, in the verdict's field names. */
WARD_EXPORT json_t *ward_kernel_error_object(json_t *c)
{
	json_t *e = json_pack("{s:O?, s:O?, s:O?}", "name", json_object_get(c, "ename"),
			      "value", json_object_get(c, "evalue"),
			      "traceback", json_object_get(c, "traceback"));
	if (e && json_is_string(json_object_get(c, "hint")))
		json_object_set(e, "hint", json_object_get(c, "hint"));
	return e;
}


WARD_EXPORT void ward_kernel_adjust_verdict(struct ward_verdict *v, const struct ward_policy *p,
					    bool violation, bool code_failed, bool truncated)
{
	if (v->status != WARD_STATUS_OK)
		return;
	if (violation) {
		v->status = WARD_STATUS_POLICY_VIOLATION;
		v->exit_code = 3;
	} else if (code_failed && v->usage.forks_refused) {
		/* the code failed after the pids limit refused it a process */
		v->status = WARD_STATUS_PIDS_LIMIT;
		v->exit_code = 1;
		v->limit = "pids";
		v->limit_value = p->pids;
	} else if (code_failed) {
		v->status = WARD_STATUS_ERROR;
		v->exit_code = 1;
	} else if (truncated) {
		v->status = WARD_STATUS_OUTPUT_LIMIT;
		v->limit = "output";
		v->limit_value = p->output_limit;
	}
}
