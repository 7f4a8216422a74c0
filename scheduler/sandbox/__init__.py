"""The sandbox API server: an in-memory, fast stand-in for kube-apiserver over real HTTP.

No kube-apiserver can run on our machines, yet the scheduler must be tested against a cluster
over HTTP. The sandbox serves the Kubernetes REST API (JSON; protobuf request bodies are read)
so that kubectl, Helm, the official ``kubernetes`` client (sync and ``kubernetes.aio``) and
kopf work against it unchanged.

Run it::

    python -m scheduler.sandbox --nodes 10 --kubeconfig-out /tmp/kc   # or: kube-py-scheduler sandbox
    kubectl --kubeconfig /tmp/kc get nodes

Without ``--kubeconfig-out`` each sandbox writes its own kubeconfig
(``kubeconfig.default_kubeconfig_path(port)``, printed on the line after the ready line).
With ``--token`` it serves HTTPS with a CA made at start (``tls.py``), written into the
kubeconfig as ``certificate-authority-data``: client-go sends tokens only over TLS.
The CLI starts it with the scheduler's prerequisites (namespace ``kube-py-scheduler`` and the
PodGroup CRD; ``--no-scheduler-prereqs``); ``Sandbox()`` is bare unless
``scheduler_prereqs=True``.

Testing API (stable)
--------------------
In-process, on the caller's event loop::

    from scheduler.sandbox import Sandbox
    async with Sandbox(nodes=3, token=None, simulate_kubelet=True, watch_history=10000) as sb:
        sb.url; sb.token; sb.write_kubeconfig(path); sb.faults; sb.counters()

Other keyword arguments: host, port, tls (default: on iff token), scheduler_prereqs,
simulate_controllers (default True), namespace_controller_delay (s, default 1), node_cpu,
node_memory, node_pods, node_labels,
max_requests_inflight, max_mutating_requests_inflight, bookmark_interval (s),
max_grace_seconds (cap on pod termination grace, s), kubelet_tick (s),
simulate_pv_controller (default True), auth_users (``{token: (username, [groups])}``),
auth_allow (``[(username, verb, path)]``).
``sb.add_nodes(n)`` adds simulated nodes; ``sb.drop_watches()`` / ``sb.compact()`` inject the
two watch faults directly; ``sb.raw_put(obj)`` is the raw-write fault.

On its own thread and loop (sync tests, ``run --sandbox``)::

    handle = Sandbox.start_in_thread(nodes=3)   # -> SandboxThread
    handle.url; handle.token; handle.admin; handle.write_kubeconfig(path); handle.stop()

As a subprocess (``scheduler.sandbox.testing``)::

    with SandboxProcess(nodes=3, token="t") as sp:          # or: async with
        sp.url; sp.kubeconfig_path; sp.token; sp.admin; sp.proc

Faults, over HTTP on ``/sandbox/v1/`` (same bearer token), wrapped by
``SandboxAdmin(url, token)`` (blocking methods; ``a``-prefixed coroutine twins) and, in-process,
by ``sb.faults`` (a ``Faults``; call it on the sandbox's loop):

=================================  ===========================================================
``drop_watches()``                 end every open watch stream (clients must re-watch)
``compact()``                      forget watch history: older resourceVersions get 410
``fail(verb, resource, *, code,    fail matching requests; verb is a Kubernetes verb (get,
times=1, probability=1.0,          list, watch, create, update, patch, delete,
subresource="*", namespace="*",    deletecollection), resource a plural with its group for
message="", retry_after=1)``       non-core groups (``pods``, ``podgroups.scheduling.x-k8s.io``);
                                   subresource e.g. ``binding``; ``times=None``: until cleared
``add_latency(seconds, verb,       delay matching requests
resource)``
``raw_put(obj)``                   store ``obj`` bypassing defaulting, validation and admission
                                   (an object written by an API server with looser validation,
                                   e.g. version skew: a pod with ``cpu: "abc"``); creates or
                                   replaces by apiVersion/kind, namespace (default "default")
                                   and name, with a new uid and creationTimestamp on create
                                   (kept on replace), a new resourceVersion and the normal
                                   watch event; returns the stored object. HTTP:
                                   ``POST /sandbox/v1/raw`` (201); ``SandboxAdmin.raw_put`` /
                                   ``araw_put``; in-process ``sb.faults.raw_put`` /
                                   ``sb.raw_put``
``pause()`` / ``resume()``         requests wait while paused
``clear()``                        remove failures, latencies and pause
``counters()``                     ``{"requests": {"create pods/binding": 3, ...}, "bindings",
                                   "evictions", "open_watches", "resource_version"}``
``reset_counters()``
=================================  ===========================================================

Pytest fixtures (``tests/conftest.py``): ``sandbox`` (in-process, 3 nodes; override with
``@pytest.mark.sandbox(nodes=..., ...)``), ``sandbox_factory`` (``await
sandbox_factory(**kw)``), ``sandbox_process`` (factory: ``sandbox_process(**flags)``),
``kubeconfig`` (path of a kubeconfig for ``sandbox``).

Simulated nodes and kubelet
---------------------------
``--nodes N`` creates Ready nodes ``node-0000``... labelled with hostname, os, arch, zone
(``zone-a/b/c`` round robin) and region ``region-1`` (``--no-node-topology``: neither, as
upstream scheduler_perf's node-default template), capacity = allocatable from
``--node-cpu/--node-memory/--node-pods``, plus ``--node-labels``. With the simulated kubelet
(default on) a pod bound to a simulated node becomes Running within ~10 ms (status writes are
batched), with podIP/hostIP, conditions and containerStatuses. A node is simulated unless it
has the annotation ``sandbox.kube-py-scheduler.io/simulated: "false"``; nodes created by
clients are simulated too. Pod annotations: ``sandbox.kube-py-scheduler.io/run-seconds: "N"``
makes the pod finish after N seconds (Succeeded), with ``.../exit-code: "K"`` (K != 0) it
fails. Deleting a running pod on a simulated node is graceful: deletionTimestamp is set and
the pod goes away after min(grace, 1 s); ``gracePeriodSeconds=0`` is immediate. Pods that
are unbound, finished, on unsimulated nodes, or with the kubelet off are deleted at once.

PersistentVolume controller
---------------------------
On by default (``--simulate-pv-controller/--no-simulate-pv-controller``,
``Sandbox(simulate_pv_controller=...)``), so the VolumeBinding plugin works end to end; it
acts a few ms after the triggering write and every write it makes gets a new resourceVersion
and a watch event (``pvcontroller.py``). A PV whose ``spec.claimRef`` names an existing claim
is bound to it (PV claimRef uid + phase Bound; PVC ``spec.volumeName``, annotations
``pv.kubernetes.io/bind-completed`` and ``bound-by-controller``, status phase/capacity/
accessModes). An unbound claim of an Immediate class (or of no class) gets the smallest
Available PV that fits (class, size, access modes, volume mode, selector), else is provisioned
if its class has a provisioner. A claim annotated ``volume.kubernetes.io/selected-node`` with
a WaitForFirstConsumer class whose provisioner is not ``kubernetes.io/no-provisioner`` gets a
CSI PV ``pvc-<claim uid>`` (capacity = request, the claim's access modes, the class's reclaim
policy (default Delete), node affinity on the node's ``topology.kubernetes.io/zone``, else
``kubernetes.io/hostname``, annotation ``pv.kubernetes.io/provisioned-by``). Deleting a claim
makes its PV Released; reclaim policy Delete then removes it; a bound claim whose PV is gone
is Lost. New PVs start Available, PVCs Pending; the DefaultStorageClass admission gives a claim
without ``storageClassName`` the default class.

Events: one store, two views
----------------------------
core/v1 ``events`` and ``events.k8s.io/v1`` ``events`` are views of the same stored objects
(``events.py``), converted like upstream (regarding/involvedObject, note/message,
deprecatedSource/source, deprecatedCount/count, deprecatedFirst/LastTimestamp, reportingController/
reportingComponent; eventTime, series, action, reason, type, related, reportingInstance as is).
Gets, lists, watches, updates and patches work in both; each view has its upstream field
selectors (core: ``involvedObject.*``, reason, type, source, reportingComponent;
events.k8s.io: ``regarding.*``, reason, type, source, reportingController). Writes through
events.k8s.io/v1 get upstream's strict validation (eventTime, reportingController/Instance,
action, reason, type required; deprecated fields unset on create; only ``series`` may change);
time fields are decoded like Go's MicroTime/Time (400 if not RFC3339(Micro)) and re-encoded in
UTC. So ``kubectl describe pod`` shows events the scheduler wrote through events.k8s.io/v1.

TokenReview and SubjectAccessReview
-----------------------------------
``authentication.k8s.io/v1 tokenreviews`` and ``authorization.k8s.io/v1
subjectaccessreviews`` (create only) answer from a static table (``auth.py``):
``--auth-user TOKEN=USERNAME[:GROUP1;GROUP2]`` (repeatable; groups follow the last ``:``, so
write ``t=system:serviceaccount:ns:sa:`` for a username with colons and no groups) and
``--auth-allow USERNAME:VERB:PATH`` (repeatable, split from the right; ``*`` wildcards, a
trailing ``*`` is a prefix match; for resourceAttributes PATH is compared with
``resource[.group][/subresource]``). Authenticated users also get ``system:authenticated``;
``status.authenticated`` is omitted when false (Go's omitempty). The ``--token`` bearer auth of
the API itself is unchanged and independent of the table.

Served resources
----------------
core/v1 namespaces, pods (+binding, status, eviction), bindings, nodes (+status), events,
persistentvolumes, persistentvolumeclaims (+status), services, configmaps, secrets,
replicationcontrollers (stored, for the scheduler's spreading informers),
serviceaccounts; apps/v1 deployments, replicasets, statefulsets (+scale); batch/v1 jobs, cronjobs;
policy/v1 poddisruptionbudgets; storage.k8s.io/v1 storageclasses, csinodes, csidrivers,
csistoragecapacities; coordination.k8s.io/v1 leases; events.k8s.io/v1 events (a view of
core/v1 events); authentication.k8s.io/v1 tokenreviews; authorization.k8s.io/v1
subjectaccessreviews;
scheduling.k8s.io/v1 priorityclasses; rbac.authorization.k8s.io/v1 roles, rolebindings,
clusterroles, clusterrolebindings (stored only, not enforced); apiextensions.k8s.io/v1
customresourcedefinitions and whatever they define; resource.k8s.io/v1 deviceclasses,
resourceclaims (+status), resourceclaimtemplates, resourceslices (Dynamic Resource
Allocation, with kube-apiserver's defaulting, validation and immutability: ``dra.py``).

Speed (``tests/perf/bench_sandbox.py``, 2 cores, clients in other processes)
---------------------------------------------------------------------------
5000 nodes + 10000 pods created at ~1700 writes/s, limited by the Python clients: the server
spends ~250 us of CPU per write (~4000 writes/s of capacity) and is ~40 % busy meanwhile;
listing 10000 pods takes ~0.25 s (raw HTTP + orjson); binding from 32 connections runs at
~2000 binds/s with the simulated kubelet on and 10 watchers, whose events arrive ~18 ms
(p50) / ~80 ms (p99) after the bind response.

Fidelity
--------
Matches kube-apiserver for: metadata (uid, one cluster-wide increasing resourceVersion,
creationTimestamp, generation bumped on spec changes only, generateName,
deletionTimestamp + finalizers), Status errors with upstream codes, reasons and messages,
PUT with optimistic concurrency, no-op updates that keep the resourceVersion, merge /
JSON / strategic-merge patches, status subresources, list limit/continue, label selectors
(full syntax) and per-resource field selectors (unsupported fields are a 400 as upstream),
watch from a resourceVersion (exact replay), 410 Expired as an ERROR event, bookmarks,
``sendInitialEvents``, selector transitions as ADDED/DELETED, pods/binding and
pods/eviction with PodDisruptionBudgets, CRDs (scope, versions, status subresource,
shortNames, categories, printer columns, structural-schema pruning and basic validation),
server-side Tables for kubectl, namespace lifecycle (the ``finalize`` subresource included),
priority and DefaultStorageClass admission, 401 with
``--token``, 429 with Retry-After from max-inflight, pod defaulting that the scheduler reads
(schedulerName, priority, requests from limits, QoS class, default NoExecute tolerations).

Limits (what it does not emulate)
---------------------------------
* DRA: ``--dra-devices gpu=8`` runs a simulated driver (``dradriver.py``) publishing a
  ResourceSlice per node and a DeviceClass; the kubelet starts a pod with claims only once
  they are allocated for its node and reserved for it. No device preparation (CDI), no
  extended-resource mapping, no device taint rules.
* The resourceclaim controller (``claimcontroller.py``) creates claims from templates,
  drops reservations of pods that are gone or done, deallocates unused claims and deletes
  generated ones with their pod, as kube-controller-manager does; no metrics.
* Controllers are minimal (``controllers.py``): Deployment -> ReplicaSet -> pods and Job ->
  pods without rollout pacing, revision history limits, pod failure/success policies,
  suspend or TTL; no StatefulSet, DaemonSet or CronJob controllers; PDB status is not
  maintained (eviction computes the budget live from matching Ready pods).
* PV controller: no pv/pvc-protection finalizers, recycling, retroactive default class,
  expansion or attach/detach; no provisioning failures or CSIStorageCapacity checks.
* TokenReview/SubjectAccessReview answer from the static table only (no RBAC evaluation, no
  service-account tokens, no selfsubject*/localsubjectaccessreviews).
* No RBAC, admission webhooks, quotas, limit ranges, service-account tokens or volumes
  injected into pods; pods with an explicit ``spec.priority`` keep it (upstream rejects a
  mismatch with their priority class).
* Responses are JSON only; protobuf request bodies are decoded for the kinds of ``kubectl
  create`` and DeleteOptions (``protobuf.py``; others are 415), CBOR is 415 (client-go then
  falls back to JSON). OpenAPI is a stub: ``/openapi/v3`` lists, per
  group-version, PATCH operations with the ``fieldValidation`` parameter and no schemas (what
  kubectl's default ``--validate=strict`` checks before it would need schemas), and
  ``/openapi/v2`` is an empty document; so ``kubectl apply -f`` works without
  ``--validate=false`` but ``kubectl explain`` does not. ``fieldValidation=Strict`` is
  accepted and not enforced (custom resources are pruned silently). As with a real cluster,
  a custom resource applied in the same ``kubectl apply -f dir/`` run as its CRD fails with
  "ensure CRDs are installed first" (``kubectl apply -k`` orders CRDs first and works).
* No aggregated discovery (clients fall back to legacy discovery); no ``/logs``, ``/exec``,
  ``/portforward``.
* Server-side apply (``application/apply-patch+yaml``) is a field merge (strategic for
  built-ins, JSON merge for custom resources) without managedFields or conflict detection.
* Strategic merge patch knows the merge keys of the common lists (containers, env, ports,
  volumes, conditions, ownerReferences, finalizers, ...), others are replaced.
* Lists are served from the current state: a ``continue`` token resumes after its key in
  the current state rather than in a snapshot (a forced compaction makes old tokens 410);
  ``resourceVersionMatch`` is ignored.
* Pod spec updates are restricted like upstream in simplified form; validation covers names,
  labels, annotations, quantities and required pod fields, not every upstream rule.
* Simulated kubelet: no node leases or heartbeats, no probes, restartPolicy is ignored,
  all containers are Ready at once.
"""

from .server import Sandbox, SandboxConfig, SandboxThread

__all__ = ["Sandbox", "SandboxConfig", "SandboxThread"]
