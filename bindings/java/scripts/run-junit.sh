#!/bin/sh
# Runs the Java binding's JUnit 5 tests for one backend under -Xcheck:jni and fails
# on a failed test or on any warning of the JNI checker.
# usage: run-junit.sh JAVA JUNIT_JAR CLASSPATH LIBSIMBA_JNI BACKEND [launcher args...]
#   BACKEND is memory, redis, postgres or zookeeper: the URL comes from
#   SIMBA_TEST_<BACKEND>_URL (memory needs none); an unset URL skips that backend.
set -u
java=$1 junit=$2 cp=$3 lib=$4 backend=$5
shift 5
case $backend in
  memory) url="memory://java-tests" ;;
  redis) url=${SIMBA_TEST_REDIS_URL:-} ;;
  postgres) url=${SIMBA_TEST_POSTGRES_URL:-} ;;
  zookeeper) url=${SIMBA_TEST_ZOOKEEPER_URL:-} ;;
  *) echo "unknown backend $backend" >&2; exit 2 ;;
esac
if [ -z "$url" ]; then
  echo "SKIP: SIMBA_TEST_$(echo "$backend" | tr a-z A-Z)_URL is not set: the Java tests on $backend are skipped"
  exit 0
fi
log=$(mktemp "${TMPDIR:-/tmp}/simba-java-$backend.XXXXXX")
trap 'rm -f "$log"' EXIT
"$java" -Xcheck:jni -Dsimba.jni.library="$lib" -Dsimba.test.backend="$backend" \
  -Dsimba.test.url="$url" -Dsimba.test.java="$java" -Dsimba.test.classpath="$cp" \
  -jar "$junit" --class-path "$cp" --disable-banner --details=tree \
  --config=junit.jupiter.execution.timeout.default=60s "$@" >"$log" 2>&1
rc=$?
cat "$log"
if grep -E 'WARNING in native method|WARNING: JNI|FATAL ERROR in native method|JNI (local|global) refs' "$log" >/dev/null; then
  echo "run-junit.sh: -Xcheck:jni reported a problem (see above)" >&2
  [ $rc -ne 0 ] || rc=1
fi
if [ $rc -eq 0 ] && ! grep -E '\[ +[1-9][0-9]* tests successful' "$log" >/dev/null; then
  echo "run-junit.sh: no test succeeded" >&2
  rc=1
fi
exit $rc
