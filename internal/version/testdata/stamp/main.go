// Command stamp prints its version line: TestLdflagsStampTheVersion links it
// with the -X flags the Makefile passes.
package main

import (
	"fmt"

	"github.com/fedfailover/fedfailover/internal/version"
)

func main() { fmt.Println(version.Line("prog")) }
