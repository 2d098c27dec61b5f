// Package defaults fills unset controller options: one rule ("zero or
// negative means the default") for every Options struct.
package defaults

import "time"

// Set replaces a zero or negative value with def.
func Set[T time.Duration | int | float32](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// String replaces an empty string with def.
func String(v *string, def string) {
	if *v == "" {
		*v = def
	}
}

// Clock replaces a nil clock with time.Now.
func Clock(now *func() time.Time) {
	if *now == nil {
		*now = time.Now
	}
}
