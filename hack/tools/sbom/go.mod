module github.com/fedfailover/fedfailover/hack/tools/sbom

go 1.26.0
