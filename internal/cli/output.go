package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
)

// Output formats: without -o (or with -o wide) a command prints its
// tables; every other -o value is k8s.io/cli-runtime's, as in kubectl get:
// json, yaml, kyaml, name, jsonpath=..., jsonpath-file=...,
// go-template=..., go-template-file=..., with --template and
// --allow-missing-template-keys.
const wide = "wide"

// PrintFlags are -o, --template and --allow-missing-template-keys of a
// command that prints a report.
type PrintFlags struct {
	flags *genericclioptions.PrintFlags
}

// NewPrintFlags returns the flags of a command that prints a report.
func NewPrintFlags() *PrintFlags {
	return &PrintFlags{flags: genericclioptions.NewPrintFlags("")}
}

// AllowedFormats lists what -o accepts: wide, then cli-runtime's formats.
func (f *PrintFlags) AllowedFormats() []string {
	return append([]string{wide}, f.flags.AllowedFormats()...)
}

// AddFlags adds -o and the template flags to cmd, and completes -o.
// (kubectl get's --show-managed-fields is left out: reports have no
// managedFields.)
func (f *PrintFlags) AddFlags(cmd *cobra.Command) {
	f.flags.TemplatePrinterFlags.AddFlags(cmd)
	cmd.Flags().StringVarP(f.flags.OutputFormat, "output", "o", "",
		"Output format: the tables when not given, or one of: "+strings.Join(f.AllowedFormats(), ", ")+".")
	f.flags.OutputFlagSpecified = func() bool { return cmd.Flags().Changed("output") }
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return f.AllowedFormats(), cobra.ShellCompDirectiveNoFileComp
	})
}

// Output checks -o and returns what it asks for. An unknown format is
// cli-runtime's error listing the allowed ones; a template that does not
// parse or a template file that cannot be read fail here too, before
// anything is read from the host.
func (f *PrintFlags) Output() (*Output, error) {
	format := *f.flags.OutputFormat
	template := *f.flags.TemplatePrinterFlags.TemplateArgument
	switch {
	case format == wide:
		return &Output{table: true, wide: true}, nil
	case format == "" && template == "":
		return &Output{table: true}, nil
	}
	if _, err := f.flags.ToPrinter(); err != nil {
		if genericclioptions.IsNoCompatiblePrinterError(err) {
			return nil, genericclioptions.NoCompatiblePrinterError{OutputFormat: &format, AllowedFormats: f.AllowedFormats()}
		}
		return nil, err
	}
	o := &Output{format: strings.ToLower(format), printer: f.flags.ToPrinter}
	if o.format == "" {
		o.format = "go-template" // --template without -o, as in kubectl
	}
	return o, nil
}

// Output prints reports as -o asked.
type Output struct {
	table, wide bool
	// format is the -o value in lower case; only json, yaml and name are
	// told apart from the rest.
	format string
	// printer returns a new cli-runtime printer for the format (a YAML
	// printer counts the documents it printed).
	printer func() (printers.ResourcePrinter, error)
}

// Table says the tables are printed (no -o, or -o wide).
func (o *Output) Table() bool { return o.table }

// Print writes the report: table(w, wide) for the tables, else the
// report through cli-runtime's printer.
func (o *Output) Print(w io.Writer, r Report, table func(w io.Writer, wide bool) error) error {
	if o.table {
		return table(w, o.wide)
	}
	b, err := o.render(r)
	if _, werr := w.Write(b); err == nil {
		err = werr
	}
	return err
}

// render prints r into a buffer. On an error it returns what was printed
// too: a go-template printer writes what helps to debug the template.
func (o *Output) render(r Report) ([]byte, error) {
	p, err := o.printer()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if o.format != "name" {
		err := p.PrintObj(r, &b)
		return b.Bytes(), err
	}
	for _, obj := range r.Objects() {
		if err := p.PrintObj(obj, &b); err != nil {
			return b.Bytes(), err
		}
	}
	return b.Bytes(), nil
}

// Stream prints a report per change for --watch (not for the tables):
// with -o json one document per line, with -o yaml documents separated by
// "---", with the other formats the output of each ending in a newline.
// A report that would print the same as the last one printed (apart from
// its time, which differs on every read) is not printed again.
type Stream struct {
	out     *Output
	w       io.Writer
	printed int
	last    []byte
}

// NewStream starts a stream of documents on w.
func (o *Output) NewStream(w io.Writer) *Stream {
	return &Stream{out: o, w: w}
}

// untimed is a report with a time that differs on every read.
type untimed interface {
	untimed() Report
}

// Print prints r unless it shows the same as the last report printed;
// it says whether it printed.
func (s *Stream) Print(r Report) (bool, error) {
	if s.out.table {
		return false, errors.New("the tables are not printed as a stream")
	}
	key := r
	if u, ok := r.(untimed); ok {
		key = u.untimed()
	}
	k, err := s.document(key)
	if err != nil {
		return false, err
	}
	if s.printed > 0 && bytes.Equal(k, s.last) {
		return false, nil
	}
	doc := k
	if key != r {
		if doc, err = s.document(r); err != nil {
			return false, err
		}
	}
	if s.printed > 0 && s.out.format == "yaml" {
		doc = append([]byte("---\n"), doc...)
	}
	if _, err := s.w.Write(doc); err != nil {
		return false, err
	}
	s.printed++
	s.last = k
	return true, nil
}

// document renders one document of the stream: JSON on one line, every
// format ending in a newline.
func (s *Stream) document(r Report) ([]byte, error) {
	b, err := s.out.render(r)
	if err != nil {
		return nil, err
	}
	if s.out.format == "json" {
		var c bytes.Buffer
		if err := json.Compact(&c, b); err != nil {
			return nil, err
		}
		b = c.Bytes()
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	return b, nil
}
