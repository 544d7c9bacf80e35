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
// Ported from k8s.io/kubernetes v1.36.3, modified:
//   - pkg/printers/internalversion/printers.go
// The ports are listed in hack/upstream-versions.txt.

package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
)

// The tables below follow kubectl's (k8s.io/kubernetes pkg/printers/
// internalversion, v1.36): same columns, same cells, computed from the v1
// types instead of the internal ones.

// tableDef is one kind's table: its columns, the -o wide extras, and how a
// row is made.
type tableDef struct {
	columns, wide []string
	// is reports whether obj is the Go type row expects.
	is  func(obj runtime.Object) bool
	row func(obj runtime.Object, now time.Time, wide bool) []string
}

func isA[T runtime.Object](obj runtime.Object) bool {
	_, ok := obj.(T)
	return ok
}

var tables = map[schema.GroupKind]tableDef{
	{Kind: "Pod"}: {
		columns: []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"},
		wide:    []string{"IP", "NODE", "NOMINATED NODE", "READINESS GATES"},
		is:      isA[*corev1.Pod],
		row:     func(o runtime.Object, now time.Time, wide bool) []string { return podRow(o.(*corev1.Pod), now, wide) },
	},
	{Kind: "ConfigMap"}: {
		columns: []string{"NAME", "DATA", "AGE"},
		is:      isA[*corev1.ConfigMap],
		row: func(o runtime.Object, now time.Time, _ bool) []string {
			cm := o.(*corev1.ConfigMap)
			return []string{cm.Name, strconv.Itoa(len(cm.Data) + len(cm.BinaryData)), age(cm.CreationTimestamp, now)}
		},
	},
	{Kind: "Secret"}: {
		columns: []string{"NAME", "TYPE", "DATA", "AGE"},
		is:      isA[*corev1.Secret],
		row: func(o runtime.Object, now time.Time, _ bool) []string {
			s := o.(*corev1.Secret)
			return []string{s.Name, string(s.Type), strconv.Itoa(len(s.Data)), age(s.CreationTimestamp, now)}
		},
	},
	{Group: "apps", Kind: "Deployment"}: {
		columns: []string{"NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"},
		wide:    []string{"CONTAINERS", "IMAGES", "SELECTOR"},
		is:      isA[*appsv1.Deployment],
		row: func(o runtime.Object, now time.Time, wide bool) []string {
			return deploymentRow(o.(*appsv1.Deployment), now, wide)
		},
	},
	{Kind: "Node"}: {
		columns: []string{"NAME", "STATUS", "ROLES", "AGE", "VERSION"},
		wide:    []string{"INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"},
		is:      isA[*corev1.Node],
		row:     func(o runtime.Object, now time.Time, wide bool) []string { return nodeRow(o.(*corev1.Node), now, wide) },
	},
}

// genericTable is kubectl's table for kinds it has no printer for (and no
// additionalPrinterColumns, which a cache file does not hold).
var genericTable = tableDef{columns: []string{"NAME", "AGE"}}

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

func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func genericRow(o *object, now time.Time) []string {
	created := "<unknown>"
	if o.Meta != nil {
		created = age(o.Meta.GetCreationTimestamp(), now)
	}
	return []string{o.Name(), created}
}

func podRow(pod *corev1.Pod, now time.Time, wide bool) []string {
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
	row := []string{pod.Name, fmt.Sprintf("%d/%d", readyContainers, totalContainers), reason, restartsStr, age(pod.CreationTimestamp, now)}
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
	return append(row, orNone(podIP), orNone(pod.Spec.NodeName), orNone(pod.Status.NominatedNodeName), readinessGates)
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

func deploymentRow(d *appsv1.Deployment, now time.Time, wide bool) []string {
	desired := int32(1) // the apiserver defaults spec.replicas to 1
	if d.Spec.Replicas != nil {
		desired = *d.Spec.Replicas
	}
	row := []string{
		d.Name,
		fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, desired),
		strconv.Itoa(int(d.Status.UpdatedReplicas)),
		strconv.Itoa(int(d.Status.AvailableReplicas)),
		age(d.CreationTimestamp, now),
	}
	if !wide {
		return row
	}
	selector := "<invalid>"
	if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
		selector = s.String()
	}
	var names, images []string
	for _, c := range d.Spec.Template.Spec.Containers {
		names = append(names, c.Name)
		images = append(images, c.Image)
	}
	return append(row, strings.Join(names, ","), strings.Join(images, ","), selector)
}

func nodeRow(n *corev1.Node, now time.Time, wide bool) []string {
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
	row := []string{n.Name, strings.Join(status, ","), orNone(strings.Join(roles, ",")), age(n.CreationTimestamp, now), n.Status.NodeInfo.KubeletVersion}
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
	return append(row, address(corev1.NodeInternalIP), address(corev1.NodeExternalIP),
		orUnknown(info.OSImage), kernel, orUnknown(info.ContainerRuntimeVersion))
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
