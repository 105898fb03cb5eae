"""`batchor --version` names where the running copy was installed from, read from the PEP 610
record pip writes (direct_url.json). Real installs (a wheel, a git URL) are checked end to end
in tests/adopt/; here each kind of record pip writes is described."""

from __future__ import annotations

from batchor.version import describe_direct_url


def test_a_git_install_names_the_url_the_tag_and_the_commit():
    record = {
        "url": "https://github.com/batchor-dev/batchor",
        "vcs_info": {"vcs": "git", "requested_revision": "v0.2.0", "commit_id": "0123456789abcdef0123"},
    }
    assert describe_direct_url(record) == "git+https://github.com/batchor-dev/batchor@v0.2.0 (commit 0123456789ab)"
    del record["vcs_info"]["requested_revision"]  # type: ignore[attr-defined]
    assert describe_direct_url(record) == "git+https://github.com/batchor-dev/batchor (commit 0123456789ab)"


def test_a_local_wheel_a_folder_and_an_editable_checkout_name_their_path():
    wheel = {"url": "file:///tmp/dist/batchor_llm-0.2.0-py3-none-any.whl", "archive_info": {"hashes": {}}}
    assert describe_direct_url(wheel) == "the file /tmp/dist/batchor_llm-0.2.0-py3-none-any.whl"
    assert describe_direct_url({"url": "file:///src/my%20batchor", "dir_info": {}}) == "a local folder /src/my batchor"
    editable = {"url": "file:///src/batchor", "dir_info": {"editable": True}}
    assert describe_direct_url(editable) == "an editable checkout /src/batchor"
    remote = {"url": "https://example.org/batchor_llm-0.2.0.tar.gz", "archive_info": {}}
    assert describe_direct_url(remote) == "the archive https://example.org/batchor_llm-0.2.0.tar.gz"
