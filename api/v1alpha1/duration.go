package v1alpha1

import "time"

// Duration is a positive Go duration string such as "30s", "1m30s" or "2h".
// It is a string (not metav1.Duration) so the CRD schema can validate it with
// a pattern and CEL, and admission names the exact field that is wrong.
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be a positive duration such as 30s or 5m"
type Duration string

// Get returns the parsed duration. Values admitted by the API server always
// parse; anything else (e.g. a hand-built object in a test) yields zero.
func (d Duration) Get() time.Duration {
	v, err := time.ParseDuration(string(d))
	if err != nil {
		return 0
	}
	return v
}
