package noderecovery

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func cut(key string) (string, string, bool) { return strings.Cut(key, "/") }

func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t) }

func isNoMatch(err error) bool { return meta.IsNoMatchError(err) }
