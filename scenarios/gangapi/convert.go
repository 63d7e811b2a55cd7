package gangapi

import (
	"encoding/json"
	"fmt"

	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// The conversion works on the JSON form (unstructured maps), field by field, so that fields both
// versions share (metadata, schedulingPolicy, priorityClassName, priority, schedulingConstraints,
// resourceClaims, status) pass through without a line of code each, and a field this file does not
// know fails closed below rather than vanishing.

// PodGroupToV1alpha2 converts a v1beta1 PodGroup into the v1alpha2 object to send.
func PodGroupToV1alpha2(api API, pg *schedv1beta1.PodGroup) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pg)
	if err != nil {
		return nil, fmt.Errorf("PodGroup %s: %w", pg.Name, err)
	}
	if err := podGroupMapToV1alpha2(api, m); err != nil {
		return nil, fmt.Errorf("PodGroup %s: %w", pg.Name, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(api.GroupVersion())
	u.SetKind("PodGroup")
	return u, nil
}

// PodGroupFromV1alpha2 converts a served v1alpha2 PodGroup into the v1beta1 shape callers use.
func PodGroupFromV1alpha2(api API, u *unstructured.Unstructured) (*schedv1beta1.PodGroup, error) {
	m := u.DeepCopy().Object
	if err := podGroupMapFromV1alpha2(api, m); err != nil {
		return nil, fmt.Errorf("PodGroup %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	clearTypeMeta(m)
	var pg schedv1beta1.PodGroup
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &pg); err != nil {
		return nil, fmt.Errorf("PodGroup %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &pg, nil
}

// WorkloadToV1alpha2 converts a v1beta1 Workload into the v1alpha2 object to send.
func WorkloadToV1alpha2(api API, w *schedv1beta1.Workload) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w)
	if err != nil {
		return nil, fmt.Errorf("Workload %s: %w", w.Name, err)
	}
	if err := workloadMapToV1alpha2(api, m); err != nil {
		return nil, fmt.Errorf("Workload %s: %w", w.Name, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(api.GroupVersion())
	u.SetKind("Workload")
	return u, nil
}

// WorkloadFromV1alpha2 converts a served v1alpha2 Workload into the v1beta1 shape.
func WorkloadFromV1alpha2(api API, u *unstructured.Unstructured) (*schedv1beta1.Workload, error) {
	m := u.DeepCopy().Object
	if err := workloadMapFromV1alpha2(api, m); err != nil {
		return nil, fmt.Errorf("Workload %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	clearTypeMeta(m)
	var w schedv1beta1.Workload
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &w); err != nil {
		return nil, fmt.Errorf("Workload %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &w, nil
}

// PatchToV1alpha2 converts a JSON merge patch written against v1beta1 (a partial object; null
// deletes a field) into one for v1alpha2.
func PatchToV1alpha2(api API, kind string, data []byte) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s merge patch is not a JSON object: %w", kind, err)
	}
	var err error
	switch kind {
	case "PodGroup":
		err = podGroupMapToV1alpha2(api, m)
	case "Workload":
		err = workloadMapToV1alpha2(api, m)
	default:
		err = fmt.Errorf("no conversion for kind %q", kind)
	}
	if err != nil {
		return nil, fmt.Errorf("%s patch: %w", kind, err)
	}
	return json.Marshal(m)
}

// clearTypeMeta drops apiVersion/kind: client-go's typed clients return objects without them too,
// and a v1beta1 object carrying "v1alpha2" would mislead whoever prints it.
func clearTypeMeta(m map[string]any) {
	delete(m, "apiVersion")
	delete(m, "kind")
}

func podGroupMapToV1alpha2(api API, m map[string]any) error {
	if spec, ok := m["spec"].(map[string]any); ok {
		// PodGroup spec fields new in v1beta1.
		for _, f := range []string{"parentCompositePodGroupName", "preemptionPolicy"} {
			if v, ok := spec[f]; ok && v != nil {
				return notExpressible(api, "PodGroup", "spec."+f, v)
			}
		}
		if ref, ok := spec["workloadRef"]; ok {
			delete(spec, "workloadRef")
			if r, ok := ref.(map[string]any); ok {
				w := map[string]any{}
				if v, ok := r["workloadName"]; ok {
					w["workloadName"] = v
				}
				if v, ok := r["templateName"]; ok {
					w["podGroupTemplateName"] = v
				}
				spec["podGroupTemplateRef"] = map[string]any{"workload": w}
			} else {
				spec["podGroupTemplateRef"] = ref // null: a merge patch removing it
			}
		}
		if err := disruptionModeToV1alpha2(spec, "spec.disruptionMode"); err != nil {
			return err
		}
	}
	return renameConditions(m, ConditionInitiallyScheduled, api.ScheduledCondition)
}

func podGroupMapFromV1alpha2(api API, m map[string]any) error {
	if spec, ok := m["spec"].(map[string]any); ok {
		if ref, ok := spec["podGroupTemplateRef"]; ok {
			delete(spec, "podGroupTemplateRef")
			if r, ok := ref.(map[string]any); ok {
				if w, ok := r["workload"].(map[string]any); ok {
					spec["workloadRef"] = map[string]any{"workloadName": w["workloadName"], "templateName": w["podGroupTemplateName"]}
				}
			}
		}
		if err := disruptionModeFromV1alpha2(spec, "spec.disruptionMode"); err != nil {
			return err
		}
	}
	return renameConditions(m, api.ScheduledCondition, ConditionInitiallyScheduled)
}

func workloadMapToV1alpha2(api API, m map[string]any) error {
	spec, ok := m["spec"].(map[string]any)
	if !ok {
		return nil
	}
	if v, ok := spec["compositePodGroupTemplates"]; ok && v != nil {
		if l, isList := v.([]any); !isList || len(l) > 0 {
			return notExpressible(api, "Workload", "spec.compositePodGroupTemplates", v)
		}
		delete(spec, "compositePodGroupTemplates")
	}
	return eachTemplate(spec, func(path string, t map[string]any) error {
		for _, f := range []string{"preemptionPolicy"} { // template fields new in v1beta1
			if v, ok := t[f]; ok && v != nil {
				return notExpressible(api, "Workload", path+"."+f, v)
			}
		}
		return disruptionModeToV1alpha2(t, path+".disruptionMode")
	})
}

func workloadMapFromV1alpha2(_ API, m map[string]any) error {
	spec, ok := m["spec"].(map[string]any)
	if !ok {
		return nil
	}
	return eachTemplate(spec, func(path string, t map[string]any) error {
		return disruptionModeFromV1alpha2(t, path+".disruptionMode")
	})
}

func eachTemplate(spec map[string]any, f func(path string, t map[string]any) error) error {
	ts, ok := spec["podGroupTemplates"].([]any)
	if !ok {
		return nil
	}
	for i, t := range ts {
		tm, ok := t.(map[string]any)
		if !ok {
			continue
		}
		if err := f(fmt.Sprintf("spec.podGroupTemplates[%d]", i), tm); err != nil {
			return err
		}
	}
	return nil
}

// disruptionModeToV1alpha2 turns v1beta1's one-of struct into v1alpha2's string enum.
func disruptionModeToV1alpha2(obj map[string]any, path string) error {
	v, ok := obj["disruptionMode"]
	if !ok || v == nil {
		return nil
	}
	dm, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: %v is not a v1beta1 disruption mode object", path, v)
	}
	// A null member is a merge patch deleting it, so it does not count as chosen.
	single := dm["single"] != nil
	all := dm["all"] != nil
	switch {
	case single && !all:
		obj["disruptionMode"] = "Pod"
	case all && !single:
		obj["disruptionMode"] = "PodGroup"
	default:
		return fmt.Errorf("%s: %v: want exactly one of single, all", path, v)
	}
	return nil
}

func disruptionModeFromV1alpha2(obj map[string]any, path string) error {
	v, ok := obj["disruptionMode"]
	if !ok || v == nil {
		return nil
	}
	switch v {
	case "Pod":
		obj["disruptionMode"] = map[string]any{"single": map[string]any{}}
	case "PodGroup":
		obj["disruptionMode"] = map[string]any{"all": map[string]any{}}
	default:
		return fmt.Errorf("%s: unknown v1alpha2 disruption mode %v (known: Pod, PodGroup)", path, v)
	}
	return nil
}

// renameConditions renames status.conditions[].type from one version's name to the other's.
func renameConditions(m map[string]any, from, to string) error {
	st, ok := m["status"].(map[string]any)
	if !ok {
		return nil
	}
	cs, ok := st["conditions"].([]any)
	if !ok {
		return nil
	}
	for _, c := range cs {
		if cm, ok := c.(map[string]any); ok && cm["type"] == from {
			cm["type"] = to
		}
	}
	return nil
}
