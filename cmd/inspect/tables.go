// Copyright The Kubernetes Authors.
// Copyright The boltinformer Authors.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.
//
// Ported from k8s.io/kubernetes v1.37.2, modified:
//   - pkg/printers/internalversion/printers.go
// The ports are listed in hack/upstream-versions.txt.

package main

// The column definitions and row functions below are ported from
// k8s.io/kubernetes v1.37.2, pkg/printers/internalversion/printers.go
// (podColumnDefinitions, printPod, configMapColumnDefinitions,
// printConfigMap, secretColumnDefinitions, printSecret,
// deploymentColumnDefinitions, printDeployment, nodeColumnDefinitions,
// printNode and their helpers). Changes: they read the v1 types (a cache
// file holds no internal ones) instead of the internal types, take the
// clock as an argument instead of calling time.Since, and drop the column
// descriptions. Rendering (columns, -o wide, NAMESPACE, LABELS, kind
// prefixes) is k8s.io/cli-runtime's printers.NewTablePrinter, as in kubectl.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
)

// tableDef is one kind's table: its column definitions (Priority 1 for the
// -o wide ones) and how a row is made from an object of its Go type.
type tableDef struct {
	columns []metav1.TableColumnDefinition
	// is reports whether obj is the Go type row expects.
	is  func(obj runtime.Object) bool
	row func(obj runtime.Object, now time.Time, wide bool) metav1.TableRow
}

func isA[T runtime.Object](obj runtime.Object) bool {
	_, ok := obj.(T)
	return ok
}

var (
	podColumnDefinitions = []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Ready", Type: "string"},
		{Name: "Status", Type: "string"},
		{Name: "Restarts", Type: "string"},
		{Name: "Age", Type: "string"},
		{Name: "IP", Type: "string", Priority: 1},
		{Name: "Node", Type: "string", Priority: 1},
		{Name: "Nominated Node", Type: "string", Priority: 1},
		{Name: "Readiness Gates", Type: "string", Priority: 1},
	}
	configMapColumnDefinitions = []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Data", Type: "string"},
		{Name: "Age", Type: "string"},
	}
	secretColumnDefinitions = []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Type", Type: "string"},
		{Name: "Data", Type: "string"},
		{Name: "Age", Type: "string"},
	}
	deploymentColumnDefinitions = []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Ready", Type: "string"},
		{Name: "Up-to-date", Type: "string"},
		{Name: "Available", Type: "string"},
		{Name: "Age", Type: "string"},
		{Name: "Containers", Type: "string", Priority: 1},
		{Name: "Images", Type: "string", Priority: 1},
		{Name: "Selector", Type: "string", Priority: 1},
	}
	nodeColumnDefinitions = []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Status", Type: "string"},
		{Name: "Roles", Type: "string"},
		{Name: "Age", Type: "string"},
		{Name: "Version", Type: "string"},
		{Name: "Internal-IP", Type: "string", Priority: 1},
		{Name: "External-IP", Type: "string", Priority: 1},
		{Name: "OS-Image", Type: "string", Priority: 1},
		{Name: "Kernel-Version", Type: "string", Priority: 1},
		{Name: "Container-Runtime", Type: "string", Priority: 1},
	}
	// genericColumnDefinitions is kubectl's table for kinds it has no
	// printer for (and no additionalPrinterColumns, which a cache file does
	// not hold): cli-runtime's default handler, with our clock.
	genericColumnDefinitions = []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Age", Type: "string"},
	}

	podSuccessConditions = []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully."}}
	podFailedConditions  = []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodFailed), Message: "The pod failed."}}
)

var tables = map[schema.GroupKind]tableDef{
	{Kind: "Pod"}: {
		columns: podColumnDefinitions,
		is:      isA[*corev1.Pod],
		row: func(o runtime.Object, now time.Time, wide bool) metav1.TableRow {
			return printPod(o.(*corev1.Pod), now, wide)
		},
	},
	{Kind: "ConfigMap"}: {
		columns: configMapColumnDefinitions,
		is:      isA[*corev1.ConfigMap],
		row: func(o runtime.Object, now time.Time, _ bool) metav1.TableRow {
			return printConfigMap(o.(*corev1.ConfigMap), now)
		},
	},
	{Kind: "Secret"}: {
		columns: secretColumnDefinitions,
		is:      isA[*corev1.Secret],
		row: func(o runtime.Object, now time.Time, _ bool) metav1.TableRow {
			return printSecret(o.(*corev1.Secret), now)
		},
	},
	{Group: "apps", Kind: "Deployment"}: {
		columns: deploymentColumnDefinitions,
		is:      isA[*appsv1.Deployment],
		row: func(o runtime.Object, now time.Time, wide bool) metav1.TableRow {
			return printDeployment(o.(*appsv1.Deployment), now, wide)
		},
	},
	{Kind: "Node"}: {
		columns: nodeColumnDefinitions,
		is:      isA[*corev1.Node],
		row: func(o runtime.Object, now time.Time, wide bool) metav1.TableRow {
			return printNode(o.(*corev1.Node), now, wide)
		},
	},
}

// genericTable prints NAME and AGE.
var genericTable = tableDef{
	columns: genericColumnDefinitions,
	row: func(o runtime.Object, now time.Time, _ bool) metav1.TableRow {
		row := metav1.TableRow{Object: runtime.RawExtension{Object: o}}
		name, created := "", "<unknown>"
		if m, err := meta.Accessor(o); err == nil {
			name, created = m.GetName(), age(m.GetCreationTimestamp(), now)
		}
		row.Cells = []any{name, created}
		return row
	},
}

// tableFor returns the table for o and the object to print it from: for an
// unstructured object of a kind with a table, its typed form.
func (f *cacheFile) tableFor(o *object) (tableDef, runtime.Object) {
	def, ok := tables[o.GVK.GroupKind()]
	if !ok {
		return genericTable, o.Obj
	}
	obj := o.Obj
	if u, isU := obj.(*unstructured.Unstructured); isU {
		typed, err := f.scheme.New(o.GVK)
		if err != nil || runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed) != nil {
			return genericTable, o.Obj
		}
		obj = typed
	}
	if !def.is(obj) {
		return genericTable, o.Obj
	}
	return def, obj
}

// age is upstream's translateTimestampSince, against now.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func printConfigMap(cm *corev1.ConfigMap, now time.Time) metav1.TableRow {
	row := metav1.TableRow{Object: runtime.RawExtension{Object: cm}}
	row.Cells = []any{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), age(cm.CreationTimestamp, now)}
	return row
}

func printSecret(s *corev1.Secret, now time.Time) metav1.TableRow {
	row := metav1.TableRow{Object: runtime.RawExtension{Object: s}}
	row.Cells = []any{s.Name, string(s.Type), int64(len(s.Data)), age(s.CreationTimestamp, now)}
	return row
}

func printPod(pod *corev1.Pod, now time.Time, wide bool) metav1.TableRow {
	restarts := 0
	restartableInitContainerRestarts := 0
	totalContainers := len(pod.Spec.Containers)
	readyContainers := 0
	lastRestartDate := metav1.NewTime(time.Time{})
	lastRestartableInitContainerRestartDate := metav1.NewTime(time.Time{})

	podPhase := pod.Status.Phase
	reason := string(podPhase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for _, condition := range pod.Status.Conditions {
		if condition.Type == corev1.PodScheduled && condition.Reason == corev1.PodReasonSchedulingGated {
			reason = corev1.PodReasonSchedulingGated
		}
	}

	initContainers := make(map[string]*corev1.Container)
	for i := range pod.Spec.InitContainers {
		initContainers[pod.Spec.InitContainers[i].Name] = &pod.Spec.InitContainers[i]
		if isRestartableInitContainer(&pod.Spec.InitContainers[i]) {
			totalContainers++
		}
	}

	initializing := false
	for i := range pod.Status.InitContainerStatuses {
		container := pod.Status.InitContainerStatuses[i]
		restarts += int(container.RestartCount)
		if container.LastTerminationState.Terminated != nil {
			terminatedDate := container.LastTerminationState.Terminated.FinishedAt
			if lastRestartDate.Before(&terminatedDate) {
				lastRestartDate = terminatedDate
			}
		}
		if isRestartableInitContainer(initContainers[container.Name]) {
			restartableInitContainerRestarts += int(container.RestartCount)
			if container.LastTerminationState.Terminated != nil {
				terminatedDate := container.LastTerminationState.Terminated.FinishedAt
				if lastRestartableInitContainerRestartDate.Before(&terminatedDate) {
					lastRestartableInitContainerRestartDate = terminatedDate
				}
			}
		}
		switch {
		case container.State.Terminated != nil && container.State.Terminated.ExitCode == 0:
			continue
		case isRestartableInitContainer(initContainers[container.Name]) && container.Started != nil && *container.Started:
			if container.Ready {
				readyContainers++
			}
			continue
		case container.State.Terminated != nil:
			if len(container.State.Terminated.Reason) == 0 {
				if container.State.Terminated.Signal != 0 {
					reason = fmt.Sprintf("Init:Signal:%d", container.State.Terminated.Signal)
				} else {
					reason = fmt.Sprintf("Init:ExitCode:%d", container.State.Terminated.ExitCode)
				}
			} else {
				reason = "Init:" + container.State.Terminated.Reason
			}
			initializing = true
		case container.State.Waiting != nil && len(container.State.Waiting.Reason) > 0 && container.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + container.State.Waiting.Reason
			initializing = true
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
			initializing = true
		}
		break
	}

	if !initializing || isPodInitializedConditionTrue(&pod.Status) {
		restarts = restartableInitContainerRestarts
		lastRestartDate = lastRestartableInitContainerRestartDate
		hasRunning := false
		errorReason := ""
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			container := pod.Status.ContainerStatuses[i]
			restarts += int(container.RestartCount)
			if container.LastTerminationState.Terminated != nil {
				terminatedDate := container.LastTerminationState.Terminated.FinishedAt
				if lastRestartDate.Before(&terminatedDate) {
					lastRestartDate = terminatedDate
				}
			}
			switch {
			case container.State.Waiting != nil && container.State.Waiting.Reason != "":
				reason = container.State.Waiting.Reason
			case container.State.Terminated != nil:
				if len(container.State.Terminated.Reason) > 0 {
					reason = container.State.Terminated.Reason
				} else if container.State.Terminated.Signal != 0 {
					reason = fmt.Sprintf("Signal:%d", container.State.Terminated.Signal)
				} else {
					reason = fmt.Sprintf("ExitCode:%d", container.State.Terminated.ExitCode)
				}
				if container.State.Terminated.ExitCode != 0 {
					errorReason = reason
				}
			case container.Ready && container.State.Running != nil:
				hasRunning = true
				readyContainers++
			}
		}
		if reason == "Completed" {
			if hasRunning && hasPodReadyCondition(pod.Status.Conditions) {
				reason = "Running"
			} else if errorReason != "" {
				reason = errorReason
			} else if hasRunning {
				reason = "NotReady"
			}
		}
	}

	if pod.DeletionTimestamp != nil && pod.Status.Reason == "NodeLost" {
		reason = "Unknown"
	} else if pod.DeletionTimestamp != nil && podPhase != corev1.PodFailed && podPhase != corev1.PodSucceeded {
		reason = "Terminating"
	}

	restartsStr := strconv.Itoa(restarts)
	if restarts != 0 && !lastRestartDate.IsZero() {
		restartsStr = fmt.Sprintf("%d (%s ago)", restarts, age(lastRestartDate, now))
	}
	row := metav1.TableRow{Object: runtime.RawExtension{Object: pod}}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		row.Conditions = podSuccessConditions
	case corev1.PodFailed:
		row.Conditions = podFailedConditions
	}
	row.Cells = []any{pod.Name, fmt.Sprintf("%d/%d", readyContainers, totalContainers), reason, restartsStr, age(pod.CreationTimestamp, now)}
	if !wide {
		return row
	}
	podIP := ""
	if len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	readinessGates := "<none>"
	if len(pod.Spec.ReadinessGates) > 0 {
		trueConditions := 0
		for _, gate := range pod.Spec.ReadinessGates {
			for _, condition := range pod.Status.Conditions {
				if condition.Type == gate.ConditionType {
					if condition.Status == corev1.ConditionTrue {
						trueConditions++
					}
					break
				}
			}
		}
		readinessGates = fmt.Sprintf("%d/%d", trueConditions, len(pod.Spec.ReadinessGates))
	}
	row.Cells = append(row.Cells, orNone(podIP), orNone(pod.Spec.NodeName), orNone(pod.Status.NominatedNodeName), readinessGates)
	return row
}

func isRestartableInitContainer(c *corev1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func isPodInitializedConditionTrue(status *corev1.PodStatus) bool {
	for _, condition := range status.Conditions {
		if condition.Type == corev1.PodInitialized {
			return condition.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasPodReadyCondition(conditions []corev1.PodCondition) bool {
	for _, condition := range conditions {
		if condition.Type == corev1.PodReady && condition.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func printDeployment(d *appsv1.Deployment, now time.Time, wide bool) metav1.TableRow {
	desired := int32(1) // the apiserver defaults spec.replicas to 1
	if d.Spec.Replicas != nil {
		desired = *d.Spec.Replicas
	}
	row := metav1.TableRow{Object: runtime.RawExtension{Object: d}}
	row.Cells = []any{
		d.Name,
		fmt.Sprintf("%d/%d", int64(d.Status.ReadyReplicas), int64(desired)),
		int64(d.Status.UpdatedReplicas),
		int64(d.Status.AvailableReplicas),
		age(d.CreationTimestamp, now),
	}
	if !wide {
		return row
	}
	selector := "<invalid>"
	if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
		selector = s.String()
	}
	names, images := layoutContainerCells(d.Spec.Template.Spec.Containers)
	row.Cells = append(row.Cells, names, images, selector)
	return row
}

func printNode(n *corev1.Node, now time.Time, wide bool) metav1.TableRow {
	var status []string
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				status = append(status, string(c.Type))
			} else {
				status = append(status, "Not"+string(c.Type))
			}
		}
	}
	if len(status) == 0 {
		status = append(status, "Unknown")
	}
	if n.Spec.Unschedulable {
		status = append(status, "SchedulingDisabled")
	}
	roleSet := map[string]bool{}
	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, "node-role.kubernetes.io/"):
			if role := strings.TrimPrefix(k, "node-role.kubernetes.io/"); role != "" {
				roleSet[role] = true
			}
		case k == "kubernetes.io/role" && v != "":
			roleSet[v] = true
		}
	}
	roles := make([]string, 0, len(roleSet))
	for r := range roleSet {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	row := metav1.TableRow{Object: runtime.RawExtension{Object: n}}
	row.Cells = []any{n.Name, strings.Join(status, ","), orNone(strings.Join(roles, ",")), age(n.CreationTimestamp, now), n.Status.NodeInfo.KubeletVersion}
	if !wide {
		return row
	}
	address := func(t corev1.NodeAddressType) string {
		for _, a := range n.Status.Addresses {
			if a.Type == t {
				return a.Address
			}
		}
		return "<none>"
	}
	info := n.Status.NodeInfo
	kernel := orUnknown(info.KernelVersion)
	if info.Architecture != "" {
		kernel += " (" + info.Architecture + ")"
	}
	row.Cells = append(row.Cells, address(corev1.NodeInternalIP), address(corev1.NodeExternalIP),
		orUnknown(info.OSImage), kernel, orUnknown(info.ContainerRuntimeVersion))
	return row
}

func layoutContainerCells(containers []corev1.Container) (names, images string) {
	n := make([]string, len(containers))
	i := make([]string, len(containers))
	for k, c := range containers {
		n[k], i[k] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(i, ",")
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}
