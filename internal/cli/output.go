package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// Output formats accepted by -o.
var Outputs = []string{"", "wide", "json", "yaml"}

// Print writes v as JSON or YAML, or calls table (wide for -o wide).
func Print(w io.Writer, format string, v any, table func(w io.Writer, wide bool) error) error {
	switch format {
	case "", "wide":
		return table(w, format == "wide")
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("unknown output format %q: use wide, json or yaml", format)
}
