package applydiff

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// deploymentBase is a valid Deployment's spec: a selector and its labels.
const deploymentBase = `"selector":{"matchLabels":{"app":"d"}},"template":{"metadata":{"labels":{"app":"d"}}`

// handWritten are the sequences issue 37 names: ownership, conflicts,
// force, removal, list merge keys, update and patch before apply, the
// status subresource and a custom resource.
func handWritten() []sequence {
	return []sequence{
		{Name: "conflict, force, removal", GVR: configMaps, Steps: []step{
			{Op: "apply", Manager: "a", Body: `{"data":{"x":"1","y":"1"}}`},
			{Op: "apply", Manager: "b", Body: `{"data":{"x":"2"}}`},
			{Op: "apply", Manager: "b", Force: true, Body: `{"data":{"x":"2"}}`},
			{Op: "apply", Manager: "b", Body: `{"data":{"x":"2","z":"3"}}`},
			{Op: "apply", Manager: "a", Body: `{"data":{}}`},
			{Op: "apply", Manager: "b", Body: `{"data":{"z":"3"}}`},
		}},
		{Name: "shared ownership of an equal value", GVR: configMaps, Steps: []step{
			{Op: "apply", Manager: "a", Body: `{"data":{"x":"1"},"metadata":{"labels":{"l":"a"}}}`},
			{Op: "apply", Manager: "b", Body: `{"data":{"x":"1"}}`},
			{Op: "apply", Manager: "a", Body: `{"metadata":{"labels":{"l":"a"}}}`},
			{Op: "apply", Manager: "b", Body: `{}`},
		}},
		{Name: "containers by name, ports by containerPort and protocol", GVR: deployments, Steps: []step{
			{Op: "apply", Manager: "a", Body: `{"spec":{` + deploymentBase + `,"spec":{"containers":[{"name":"a","image":"a:1","ports":[{"containerPort":80,"protocol":"TCP"},{"containerPort":81,"protocol":"TCP"}]}]}}}}`},
			{Op: "apply", Manager: "b", Body: `{"spec":{"template":{"spec":{"containers":[{"name":"b","image":"b:1"}]}}}}`},
			{Op: "apply", Manager: "b", Body: `{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"a:2"}]}}}}`},
			{Op: "apply", Manager: "b", Body: `{"spec":{"template":{"spec":{"containers":[{"name":"a","ports":[{"containerPort":80,"protocol":"UDP"}]},{"name":"b","image":"b:1"}]}}}}`},
			{Op: "apply", Manager: "a", Body: `{"spec":{` + deploymentBase + `,"spec":{"containers":[{"name":"a","image":"a:1","ports":[{"containerPort":80,"protocol":"TCP"}]}]}}}}`},
			{Op: "apply", Manager: "b", Force: true, Body: `{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"a:3"}]}}}}`},
		}},
		{Name: "update then apply", GVR: configMaps, Steps: []step{
			{Op: "apply", Manager: "a", Body: `{"data":{"x":"1"}}`},
			{Op: "update", Manager: "editor", Body: `{"data":{"x":"2","y":"2"}}`},
			{Op: "apply", Manager: "a", Body: `{"data":{"x":"1"}}`},
			{Op: "apply", Manager: "a", Body: `{"data":{"y":"2"}}`},
			{Op: "apply", Manager: "a", Force: true, Body: `{"data":{"x":"1"}}`},
			{Op: "update", Body: `{"data":{"w":"4"}}`},
		}},
		{Name: "merge, strategic and JSON patch then apply", GVR: deployments, Steps: []step{
			{Op: "apply", Manager: "a", Body: `{"spec":{"replicas":1,` + deploymentBase + `,"spec":{"containers":[{"name":"a","image":"a:1"}]}}}}`},
			{Op: "merge", Manager: "m", Body: `{"spec":{"replicas":2}}`},
			{Op: "strategic", Manager: "s", Body: `{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"a:2"}]}}}}`},
			{Op: "json", Manager: "j", Body: `[{"op":"add","path":"/metadata/labels","value":{"l":"j"}}]`},
			{Op: "apply", Manager: "a", Body: `{"spec":{"replicas":1,` + deploymentBase + `,"spec":{"containers":[{"name":"a","image":"a:1"}]}}},"metadata":{"labels":{"l":"a"}}}`},
			{Op: "apply", Manager: "a", Force: true, Body: `{"spec":{"replicas":3,` + deploymentBase + `,"spec":{"containers":[{"name":"a","image":"a:1"}]}}}}`},
		}},
		{Name: "status subresource", GVR: deployments, Steps: []step{
			{Op: "applyStatus", Manager: "st", Body: `{"status":{"replicas":1}}`},
			{Op: "apply", Manager: "a", Body: `{"spec":{` + deploymentBase + `,"spec":{"containers":[{"name":"a","image":"a:1"}]}}},"status":{"replicas":5}}`},
			{Op: "applyStatus", Manager: "st", Body: `{"status":{"replicas":2,"observedGeneration":1}}`},
			{Op: "applyStatus", Manager: "other", Body: `{"status":{"replicas":3}}`},
			{Op: "applyStatus", Manager: "other", Force: true, Body: `{"status":{"replicas":3}}`},
		}},
		{Name: "custom resource", GVR: gadgetGVR, Steps: []step{
			{Op: "apply", Manager: "a", Body: `{"spec":{"size":1,"color":"red","tags":["x","y"],"labels":{"k":"v"}}}`},
			{Op: "apply", Manager: "b", Body: `{"spec":{"tags":["z"]}}`},
			{Op: "apply", Manager: "b", Force: true, Body: `{"spec":{"tags":["z"],"labels":{"b":"1"}}}`},
			{Op: "strategic", Manager: "s", Body: `{"spec":{"size":2}}`},
			{Op: "merge", Manager: "m", Body: `{"spec":{"size":2}}`},
			{Op: "apply", Manager: "a", Body: `{"spec":{"color":"blue","labels":{"k":"v"}}}`},
			{Op: "applyStatus", Manager: "st", Body: `{"status":{"ready":true,"observed":2}}`},
			{Op: "update", Manager: "u", Body: `{"spec":{"color":"green"}}`},
			{Op: "apply", Manager: "a", Body: `{"spec":{"color":"blue"}}`},
		}},
	}
}

// randomSequences returns n sequences of applies, updates and patches by
// three managers on ConfigMap data, Gadget specs and Deployment
// containers, drawn from seed.
func randomSequences(seed int64, n int) []sequence {
	rnd := rand.New(rand.NewPCG(uint64(seed), 0))
	managers := []string{"a", "b", "c"}
	var seqs []sequence
	for i := range n {
		gvr := []schema.GroupVersionResource{configMaps, gadgetGVR, deployments}[i%3]
		seq := sequence{Name: fmt.Sprintf("random %d", i), GVR: gvr}
		for j := range 3 + rnd.IntN(6) {
			s := step{Manager: managers[rnd.IntN(len(managers))], Force: rnd.IntN(4) == 0}
			op := rnd.IntN(10)
			if j == 0 {
				op = 0
			}
			switch {
			case op < 6:
				s.Op, s.Body = "apply", randomApply(rnd, gvr)
			case op < 8:
				s.Force = false
				s.Op, s.Body = "update", randomEdit(rnd, gvr)
			default:
				s.Force = false
				s.Op, s.Body = "merge", randomEdit(rnd, gvr)
			}
			seq.Steps = append(seq.Steps, s)
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

func randomApply(rnd *rand.Rand, gvr schema.GroupVersionResource) string {
	switch gvr {
	case configMaps:
		return jsonOf(map[string]any{"data": randomData(rnd)})
	case gadgetGVR:
		spec := map[string]any{}
		if rnd.IntN(2) == 0 {
			spec["size"] = 1 + rnd.IntN(3)
		}
		if rnd.IntN(2) == 0 {
			spec["color"] = []string{"red", "blue"}[rnd.IntN(2)]
		}
		if rnd.IntN(2) == 0 {
			spec["tags"] = []string{"t" + fmt.Sprint(rnd.IntN(3))}
		}
		if rnd.IntN(2) == 0 {
			spec["labels"] = randomData(rnd)
		}
		return jsonOf(map[string]any{"spec": spec})
	}
	var containers []any
	for _, name := range []string{"a", "b", "c"} {
		if rnd.IntN(2) == 0 {
			c := map[string]any{"name": name, "image": fmt.Sprintf("%s:%d", name, 1+rnd.IntN(2))}
			if rnd.IntN(2) == 0 {
				c["ports"] = []any{map[string]any{"containerPort": 80 + rnd.IntN(2), "protocol": "TCP"}}
			}
			containers = append(containers, c)
		}
	}
	if len(containers) == 0 {
		containers = []any{map[string]any{"name": "a", "image": "a:1"}}
	}
	return `{"spec":{` + deploymentBase + `,"spec":{"containers":` + jsonOf(containers) + `}}}}`
}

// randomEdit is a merge patch that keeps the object valid.
func randomEdit(rnd *rand.Rand, gvr schema.GroupVersionResource) string {
	switch gvr {
	case configMaps:
		return jsonOf(map[string]any{"data": randomData(rnd)})
	case gadgetGVR:
		return jsonOf(map[string]any{"spec": map[string]any{"size": 1 + rnd.IntN(3), "color": []string{"red", "green"}[rnd.IntN(2)]}})
	}
	// Never 1: kube-apiserver defaults replicas to 1 and the fake does
	// not default (see its doc), so writing 1 would change ownership on
	// the fake alone.
	return jsonOf(map[string]any{"spec": map[string]any{"replicas": []int{0, 2, 3}[rnd.IntN(3)]}})
}

func randomData(rnd *rand.Rand) map[string]any {
	data := map[string]any{}
	for _, k := range []string{"w", "x", "y", "z"} {
		if rnd.IntN(2) == 0 {
			data[k] = fmt.Sprint(1 + rnd.IntN(2))
		}
	}
	return data
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
