package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
)

// table writes one kubectl-style table: upper-case headers, columns padded
// with spaces, trailing blanks trimmed.
type table struct {
	w    io.Writer
	rows [][]string
}

func newTable(w io.Writer, headers ...string) *table {
	return &table{w: w, rows: [][]string{headers}}
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) flush() error {
	tw := printers.GetNewTabWriter(t.w)
	for _, r := range t.rows {
		if _, err := fmt.Fprintln(tw, strings.Join(r, "\t")); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// age is kubectl's short age ("5m", "2d3h") of t at now, "<unknown>"-free:
// "-" when t is unset.
func age(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func yesNo(b bool) string {
	if b {
		return "Yes"
	}
	return "No"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a message on its table row.
func oneLine(s string) string {
	return orDash(strings.Join(strings.Fields(s), " "))
}
