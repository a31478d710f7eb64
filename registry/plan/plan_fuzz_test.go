package plan_test

import (
	"reflect"
	"testing"

	"github.com/ardx-dev/ardx/registry/plan"
)

// FuzzDecompose: any text decomposes without panicking into 1 to MaxSteps
// steps, numbered in order, each after earlier steps only, the same twice.
func FuzzDecompose(f *testing.F) {
	for _, s := range []string{"get the weather, then email it", "after x, y", "a after b and c", "", ",,,", "then then then", "Send it before translating. Finally print"} {
		f.Add(s)
	}
	v := plan.NewVocabulary([]plan.Capability{{Name: "get_forecast", Words: []string{"get", "forecast"}}, {Name: "get_alerts", Words: []string{"get", "alerts"}}}, []string{"weather"})
	f.Fuzz(func(t *testing.T, task string) {
		a, b := plan.Decompose(task, v), plan.Decompose(task, v)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("not deterministic: %+v %+v", a, b)
		}
		if len(a) < 1 || len(a) > plan.MaxSteps {
			t.Fatalf("%d steps", len(a))
		}
		for i, st := range a {
			if st.Step != i+1 {
				t.Fatalf("step %d numbered %d", i+1, st.Step)
			}
			for _, d := range st.After {
				if d < 1 || d >= st.Step {
					t.Fatalf("step %d after %d", st.Step, d)
				}
			}
		}
	})
}
