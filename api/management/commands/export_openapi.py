"""Write the API's OpenAPI schema to docs/openapi.json (committed; a test checks it is current)."""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from api.urls import register


class Command(BaseCommand):
    help = "Write the REST API's OpenAPI schema (docs/openapi.json by default)."

    def add_arguments(self, parser):
        parser.add_argument("--output", default=str(Path(settings.BASE_DIR) / "docs" / "openapi.json"))

    def handle(self, *args, output: str, **options):
        schema = register().get_openapi_schema(path_prefix="/api/v1")
        Path(output).write_text(json.dumps(schema, indent=2, sort_keys=True, default=str) + "\n")
        self.stdout.write(f"wrote {output} ({len(schema['paths'])} paths)")
