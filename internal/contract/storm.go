package contract

import (
	"encoding/json"
	"fmt"
	"time"
)

// Storm is a member's storm guard state, kept in AnnotationStorm on its
// KubeFedCluster so that a restart neither forgets a storm nor its
// cooldown. The zero value, stored as no annotation, is "no storm".
type Storm struct {
	// Active is true from the start of a storm until its cooldown passed.
	Active bool
	// EndedAt is when the lost nodes came back within maxUnhealthy; zero
	// while the storm lasts.
	EndedAt time.Time
}

type stormJSON struct {
	Active  bool       `json:"active"`
	EndedAt *time.Time `json:"endedAt,omitempty"`
}

// EncodeStorm returns the annotation value; keep is false when the
// annotation must be removed instead (no active storm).
func EncodeStorm(s Storm) (value string, keep bool) {
	if !s.Active {
		return "", false
	}
	j := stormJSON{Active: true}
	if !s.EndedAt.IsZero() {
		t := s.EndedAt.UTC()
		j.EndedAt = &t
	}
	b, err := json.Marshal(j)
	if err != nil {
		panic(err) // a bool and a time: cannot fail
	}
	return string(b), true
}

// DecodeStorm reads AnnotationStorm; absent is the zero Storm.
func DecodeStorm(annotations map[string]string) (Storm, error) {
	raw, ok := annotations[AnnotationStorm]
	if !ok {
		return Storm{}, nil
	}
	var j stormJSON
	if err := json.Unmarshal([]byte(raw), &j); err != nil {
		return Storm{}, fmt.Errorf("decoding annotation %s: %w", AnnotationStorm, err)
	}
	s := Storm{Active: j.Active}
	if j.EndedAt != nil {
		s.EndedAt = *j.EndedAt
	}
	return s, nil
}
