"""Dynamic admission: MutatingAdmissionWebhook and ValidatingAdmissionWebhook.

admissionregistration.k8s.io/v1 Mutating/ValidatingWebhookConfiguration objects name HTTPS
endpoints; a write that matches a webhook's rules, selectors and matchConditions (CEL, by
apiserver/admission/matchconditions.py, shared with admission policies) is sent to it as an
AdmissionReview v1, and the answer allows, denies or (mutating) patches the object.  Which
writes a rule covers is apiserver/admission/rules.py, shared with admission policies.

    config.py      configuration objects -> compiled hooks, rebuilt only when the source changes
    selection.py   namespaceSelector / objectSelector
    review.py      the AdmissionReview request, and checking the webhook's answer
    client.py      the HTTPS call (one aiohttp session, pooled connections, a deadline per call)
    failures.py    errors worded as kube-apiserver words them
    dispatch.py    what both plugins share: which hooks to call, calling one
    mutating.py, validating.py   the two plugins
"""
