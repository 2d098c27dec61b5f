package members

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func isExists(err error) bool { return apierrors.IsAlreadyExists(err) }
