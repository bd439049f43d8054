"""batch/v1 Job: pods run to completion, retried up to a backoff limit.

Unless `spec.manualSelector` is true, defaulting gives the job kube's generated selector
(`batch.kubernetes.io/controller-uid`) and labels its template to match, using the job's uid
when the registry has already set it, a fresh unique value otherwise."""

from __future__ import annotations

import uuid
from typing import Any

from apiserver import validation as v
from apiserver.age import human_duration
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources._podspec import default_template, validate_template
from apiserver.resources._shared import container_cells, ensure, format_label_selector, has_condition
from apiserver.resources._workload import validate_selector
from apiserver.resources.base import Column, ResourceDef, Subresource
from machinery.objects import Obj, get, mapping, number
from machinery.timestamps import parse_time

COMPLETION_MODES = ("NonIndexed", "Indexed")
REPLACEMENT_POLICIES = ("TerminatingOrFailed", "Failed")
UID_LABEL = "batch.kubernetes.io/controller-uid"
NAME_LABEL = "batch.kubernetes.io/job-name"


def _generate_selector(job: Obj, spec: Obj) -> None:
    template = ensure(spec, "template")
    meta = ensure(template, "metadata") if template is not None else None
    labels = ensure(meta, "labels") if meta is not None else None
    job_meta = ensure(job, "metadata")
    if labels is None or job_meta is None:
        return
    uid = job_meta.get("uid")
    if not isinstance(uid, str) or not uid:
        uid = str(uuid.uuid4())  # unique all the same; metadata.uid stays the registry's to set
    name = job_meta.get("name") if isinstance(job_meta.get("name"), str) else ""
    for label in ("job-name", NAME_LABEL):
        if name:
            labels.setdefault(label, name)
    for label in ("controller-uid", UID_LABEL):
        labels.setdefault(label, uid)
    spec.setdefault("selector", {"matchLabels": {UID_LABEL: uid}})


def default(job: Obj) -> None:
    spec = ensure(job, "spec")
    if spec is None:
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 2147483647 if spec.get("backoffLimitPerIndex") is not None else 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
    if spec.get("manualSelector") is not True and spec.get("selector") is None:
        _generate_selector(job, spec)
    template_labels = get(job, "spec.template.metadata.labels")
    meta = ensure(job, "metadata")
    if meta is not None and isinstance(template_labels, dict) and template_labels and not meta.get("labels"):
        meta["labels"] = dict(template_labels)
    default_template(job)


def validate_job_spec(job: Obj) -> list[Cause]:
    """The checks of the JobSpec under `spec`: a Job's own, or a CronJob's job template (which
    re-roots the paths it gets back)."""
    causes = validate_template(job, restart_policies=("OnFailure", "Never"))
    spec = mapping(job, "spec")
    for field in ("parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished"):
        causes += v.validate_non_negative(spec.get(field), f"spec.{field}")
    causes += v.validate_positive(spec.get("activeDeadlineSeconds"), "spec.activeDeadlineSeconds")
    mode = spec.get("completionMode")
    causes += v.validate_enum(mode, "spec.completionMode", COMPLETION_MODES)
    if mode == "Indexed" and spec.get("completions") is None:
        causes.append(v.required("spec.completions", "when completion mode is Indexed"))
    causes += v.validate_enum(spec.get("podReplacementPolicy"), "spec.podReplacementPolicy", REPLACEMENT_POLICIES)
    return causes


def validate(job: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(job, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    causes += validate_selector(job, old, "job")
    causes += validate_job_spec(job)
    if old is not None:
        causes += v.validate_immutable(job, old, "spec.completionMode")
    return causes


def fields(job: Obj) -> dict[str, str]:
    return {"status.successful": str(number(job, "status.succeeded"))}


def status_text(job: Obj) -> str:
    if has_condition(job, "Complete"):
        return "Complete"
    if has_condition(job, "Failed"):
        return "Failed"
    if get(job, "metadata.deletionTimestamp"):
        return "Terminating"
    if has_condition(job, "Suspended"):
        return "Suspended"
    if has_condition(job, "FailureTarget"):
        return "FailureTarget"
    return "Running"


def row(job: Obj, now: float) -> list[Any]:
    succeeded = number(job, "status.succeeded")
    completions = get(job, "spec.completions")
    if v.is_int(completions):
        shown = f"{succeeded}/{completions}"
    elif number(job, "spec.parallelism") > 1:
        shown = f"{succeeded}/1 of {number(job, 'spec.parallelism')}"
    else:
        shown = f"{succeeded}/1"
    start = parse_time(get(job, "status.startTime"))
    end = parse_time(get(job, "status.completionTime"))
    duration = "" if start is None else human_duration((end if end is not None else now) - start)
    names, images = container_cells(get(job, "spec.template.spec"))
    return [status_text(job), shown, duration, names, images, format_label_selector(get(job, "spec.selector"))]


RESOURCE = ResourceDef(
    group="batch",
    version="v1",
    kind="Job",
    plural="jobs",
    singular="job",
    namespaced=True,
    empty_status={},
    categories=("all",),
    subresources=(Subresource("status", "Job", handler=STATUS_VIEW),),
    default=default,
    validate=validate,
    fields=fields,
    field_selectors=("status.successful",),
    columns=(
        Column("Status", description="Status of the job."),
        Column("Completions", description="The number of pods which reached phase Succeeded."),
        Column("Duration", description="Time required to complete the job."),
        Column("Containers", priority=1, description="Names of each container in the template."),
        Column("Images", priority=1, description="Images referenced by each container in the template."),
        Column("Selector", priority=1, description="A label query over pods that should match the pod count."),
    ),
    row=row,
)
