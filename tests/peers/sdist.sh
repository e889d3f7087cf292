# Sourced by setup.sh and corpus.sh (not run on its own): fetch_sdist, the one way a PyPI sdist
# gets into the peers' cache, so that both scripts download, check and unpack alike.
#
# fetch_sdist TARGET PROJECT VERSION SDIST_FILE [SHA256] [MEMBER]: unpacks the sdist of
# PROJECT==VERSION into TARGET (only MEMBER of it when given) unless TARGET holds the marker of
# that exact version. With SHA256 the downloaded file is checked against it before it is
# unpacked. Messages name the script that sourced this one; a failure exits that script.
fetch_sdist() {
  local target=$1 project=$2 version=$3 sdist=$4 sha256=${5:-} member=${6:-}
  local caller="tests/peers/${0##*/}"
  [ -f "$target/.complete-$version" ] && return 0
  local download
  download=$(mktemp -d)
  if ! python3 -m pip download --quiet --no-deps --no-binary :all: "$project==$version" -d "$download" >&2; then
    rm -rf "$download"
    echo "$caller: cannot download $project==$version from PyPI;" \
         "the tests need it (is the registry reachable?)" >&2
    exit 1
  fi
  if [ -n "$sha256" ] && ! echo "$sha256  $download/$sdist" | sha256sum --check --quiet >&2; then
    rm -rf "$download"
    echo "$caller: $project==$version from PyPI is not the sdist this script pins" \
         "(sha256 $sha256); refusing to unpack it" >&2
    exit 1
  fi
  local top=${sdist%.tar.gz}
  rm -rf "$target"
  mkdir -p "$target"
  # shellcheck disable=SC2086 # MEMBER is one path or nothing
  tar -xzf "$download/$sdist" -C "$target" --strip-components=1 --no-same-owner \
    ${member:+"$top/$member"}
  rm -rf "$download"
  touch "$target/.complete-$version"
  echo "$caller: $project $version ready in $target" >&2
}
