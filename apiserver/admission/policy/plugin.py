"""The ValidatingAdmissionPolicy admission plugin: every write that a bound policy covers is
evaluated, and the first failure of a binding with the Deny action refuses it.

kube's refusal, reproduced: `<resource>.<group> "<name>" is forbidden: ValidatingAdmissionPolicy
'<policy>' with binding '<binding>' denied request: <message>` with the code of the
validation's reason (Invalid 422 by default, Forbidden 403, Unauthorized 401,
RequestEntityTooLarge 413), `details.causes` holding the same sentence.  A Warn binding adds
`Validation failed for ValidatingAdmissionPolicy '<policy>' with binding '<binding>': <message>`
as a warning for the client.  A policy or binding that cannot be configured (its params
missing or misdeclared) refuses the writes it covers under failurePolicy Fail.  The
admission configuration resources themselves are exempt, so a bad policy can be fixed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from apiserver import errors, warnings
from apiserver.admission.cel import Activation, EvalError
from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.policy.binding import CompiledBinding
from apiserver.admission.policy.compiled import CompiledPolicy
from apiserver.admission.policy.evaluate import Decision, evaluate
from apiserver.admission.policy.params import ParamError, ParamLookup, collect
from apiserver.admission.policy.source import LivePolicies
from apiserver.admission.requestvars import namespace_variable, request_variable
from machinery import objects
from machinery.objects import Obj

ADMISSION_GROUP = "admissionregistration.k8s.io"
EXEMPT = frozenset(
    {
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
        "mutatingadmissionpolicies",
        "mutatingadmissionpolicybindings",
    }
)
_CODES = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413, "Invalid": 422}


def exempt(request: AdmissionRequest) -> bool:
    return request.resource.group == ADMISSION_GROUP and request.resource.plural in EXEMPT


def _no_params(api_version: str, kind: str) -> None:
    return None


class ValidatingAdmissionPolicy:
    name = "ValidatingAdmissionPolicy"

    def __init__(
        self,
        policies: LivePolicies,
        namespace: Callable[[str], Obj | None],
        params: ParamLookup = _no_params,
        warn: Callable[[str], None] = warnings.add_warning,
    ) -> None:
        """`namespace(name)` reads a Namespace (from its watch cache); `params(apiVersion,
        kind)` finds the source of a paramKind; `warn` queues a warning for the client."""
        self._policies = policies
        self._namespace = namespace
        self._params = params
        self._warn = warn

    def handles(self, request: AdmissionRequest) -> bool:
        return not exempt(request) and bool(self._policies.current().pairs)

    async def validate(self, request: AdmissionRequest) -> None:
        refusal = self.decide(request)
        if refusal is not None:
            raise refusal

    def decide(self, request: AdmissionRequest) -> errors.StatusError | None:
        """The refusal of `request`, or None; warnings go to `warn` on the way."""
        run = _Run(request, self._namespace)
        denied: list[tuple[CompiledPolicy, CompiledBinding | None, Decision]] = []
        for policy, bindings in self._policies.current().pairs:
            if policy.match is None or not policy.match.matches(request, run.namespace_labels):
                continue
            if policy.config_error:
                if policy.failure_policy == "Fail":
                    denied.append((policy, None, Decision(f"failed to configure policy: {policy.config_error}")))
                continue
            for binding in bindings:
                if binding.match is not None and not binding.match.matches(request, run.namespace_labels):
                    continue
                try:
                    if binding.config_error:
                        raise ParamError(binding.config_error)
                    params = collect(policy.param_kind, binding.param_ref, self._params, request.namespace)
                except ParamError as e:
                    if policy.failure_policy == "Fail":
                        denied.append((policy, binding, Decision(f"failed to configure binding: {e}")))
                    continue
                for param in params:
                    for decision in run.evaluate(policy, param):
                        if "Deny" in binding.actions:
                            denied.append((policy, binding, decision))
                        if "Warn" in binding.actions:
                            self._warn(
                                f"Validation failed for ValidatingAdmissionPolicy '{policy.name}' "
                                f"with binding '{binding.name}': {decision.message}"
                            )
        if not denied:
            return None
        return refusal(request, *denied[0])


class _Run:
    """What one request's evaluations share: the namespace (read at most once) and the CEL
    activation of each distinct params object (converting the object is most of the cost)."""

    def __init__(self, request: AdmissionRequest, namespace: Callable[[str], Obj | None]) -> None:
        self.request = request
        self._read_namespace = namespace
        self._namespace: Obj | None = None
        self._namespace_read = False
        self._activations: dict[int, tuple[Obj | None, Activation | None]] = {}
        self._values: dict[str, Any] | None = None

    def namespace(self) -> Obj | None:
        if not self._namespace_read:
            self._namespace_read = True
            if self.request.namespace and not (
                self.request.resource.group == "" and self.request.resource.plural == "namespaces"
            ):
                self._namespace = self._read_namespace(self.request.namespace)
        return self._namespace

    def namespace_labels(self, name: str) -> Mapping[str, str]:
        ns = self.namespace()
        meta = ns.get("metadata") if ns is not None else None
        labels = meta.get("labels") if isinstance(meta, dict) else None
        return labels if isinstance(labels, dict) else {}

    def values(self, param: Obj | None) -> dict[str, Any]:
        if self._values is None:
            r = self.request
            self._values = {
                "object": r.object,
                "oldObject": r.old_object,
                "request": request_variable(r),
                "namespaceObject": namespace_variable(self.namespace()),
            }
        return {**self._values, "params": param}

    def evaluate(self, policy: CompiledPolicy, param: Obj | None) -> list[Decision]:
        values = self.values(param)
        cached = self._activations.get(id(param))
        if cached is None or cached[0] is not param:
            try:
                activation: Activation | None = Activation.of(values)
            except EvalError:
                activation = None  # `evaluate` meets the same error and applies the failure policy
            cached = (param, activation)
            self._activations[id(param)] = cached
        return evaluate(policy, values, cached[1])


def refusal(
    request: AdmissionRequest, policy: CompiledPolicy, binding: CompiledBinding | None, decision: Decision
) -> errors.StatusError:
    """kube's admission.NewForbidden wording, with the code and reason of the decision."""
    bound = f" with binding '{binding.name}'" if binding is not None else ""
    why = f"ValidatingAdmissionPolicy '{policy.name}'{bound} denied request: {decision.message}"
    res = request.resource
    name = request.name or objects.name(request.object)
    what = errors.qualified(res.plural, res.group)
    message = f'{what} "{name}" is forbidden: {why}' if name else f"{what} is forbidden: {why}"
    details: dict[str, Any] = {"kind": res.plural, "causes": [{"message": why}]}
    if name:
        details["name"] = name
    if res.group:
        details["group"] = res.group
    reason = decision.reason if decision.reason in _CODES else "Invalid"
    return errors.StatusError(_CODES[reason], reason, message, details)
