"""Renders configs with Heat's own code, in-process, for differential tests.

`heat_render.py cloud_config` reads a JSON list of OS::Heat::CloudConfig `cloud_config`
property values on stdin and prints the JSON list of the `config` each gets, built exactly as
heat.engine.resources.openstack.heat.cloud_config.CloudConfig.handle_create builds it (the
resource itself needs a stack and the RPC API, so only its rendering line runs here).

`heat_render.py multipart` reads a JSON list of OS::Heat::MultipartMime `parts` lists (inline
text parts) and prints the message each gets from MultipartMime's own `_append_part` and
`email.mime.multipart.MIMEMultipart(...).as_string()`, as MultipartMime.get_message does.

`heat_render.py mime_stack` reads a JSON list of resources in dependency order, each
`{"cloud_config": value}` or `{"parts": [...]}` (MultipartMime parts, whose `config` may be
`{"ref": index}`: the id of an earlier resource, as `get_resource` gives it), and prints the JSON
list of their `config`s: MultipartMime's own `get_message` runs, with its RPC client answering
`show_software_config` from the earlier resources (as Heat's software config store would).
A resource whose rendering raises gets `ERROR: <exception class>` instead.
"""

import contextlib
import json
import sys
import uuid

from email.mime import multipart

from heat.common import template_format
from heat.engine.resources.openstack.heat import multi_part


def cloud_config(value):
    rendered = template_format.yaml.dump(value, Dumper=template_format.yaml_dumper)
    return '#cloud-config\n%s' % rendered


def mime(parts):
    subparts = []
    for item in parts:
        multi_part.MultipartMime._append_part(
            subparts, item['config'], item.get('subtype', ''),
            item.get('filename', ''))
    return multipart.MIMEMultipart(_subparts=subparts).as_string()


class _ConfigStore:
    """The RPC client calls get_message makes, over the configs rendered so far."""

    def __init__(self):
        self.configs = {}

    @contextlib.contextmanager
    def ignore_error_by_name(self, name):
        try:
            yield
        except KeyError:
            pass

    def show_software_config(self, context, config_id):
        return {'config': self.configs[config_id]}


class _Mime(multi_part.MultipartMime):
    """MultipartMime without a stack: get_message reads only these attributes."""

    def rpc_client(self):
        return self.store


def mime_stack(resources):
    store = _ConfigStore()
    ids, rendered = [], []
    for resource in resources:
        if 'cloud_config' in resource:
            config = cloud_config(resource['cloud_config'])
        else:
            # Heat's properties hold every key of a part's schema, `type` defaulting to text.
            parts = [{'config': ids[item['config']['ref']]
                      if isinstance(item['config'], dict) else item['config'],
                      'filename': item.get('filename'),
                      'type': item.get('type', 'text'),
                      'subtype': item.get('subtype')} for item in resource['parts']]
            mime_resource = object.__new__(_Mime)
            mime_resource.properties = {'parts': parts}
            mime_resource.context = None
            mime_resource.store = store
            try:
                config = mime_resource.get_message()
            except Exception as error:  # Heat fails the resource on any of them.
                config = 'ERROR: %s' % type(error).__name__
        ids.append(str(uuid.uuid4()))
        store.configs[ids[-1]] = config
        rendered.append(config)
    return rendered


def main():
    if sys.argv[1] == 'mime_stack':
        json.dump(mime_stack(json.load(sys.stdin)), sys.stdout)
        return
    render = {'cloud_config': cloud_config, 'multipart': mime}[sys.argv[1]]
    values = json.load(sys.stdin)
    json.dump([render(value) for value in values], sys.stdout)


if __name__ == '__main__':
    main()
