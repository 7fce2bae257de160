"""A small pet-shop HTTP API with its own OpenAPI 3.1 document, for `examples/petstore.yaml` and tests.

Run it with `python examples/petstore_server.py --port 8080` (needs `pip install 'runner[serve]'`); the
document is at http://127.0.0.1:8080/openapi.json and the API under /api (the document's server URL
is relative, so clients resolve it against the document's own URL).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

_PET = {
    "type": "object",
    "required": ["id", "name"],
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "tag": {"type": ["string", "null"]},
        "owner": {"type": ["string", "null"]},
    },
}
_ERROR = {
    "type": "object",
    "required": ["code", "message"],
    "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
}
_PET_ID = {
    "name": "petId",
    "in": "path",
    "required": True,
    "description": "The id of the pet.",
    "schema": {"type": "integer"},
}


def _json(description: str, ref: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": ref}}}}


OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "Pet shop", "version": "1.0.0", "description": "A tiny pet shop to try tools on."},
    "servers": [{"url": "/api"}],
    "paths": {
        "/pets": {
            "get": {
                "operationId": "listPets",
                "summary": "List the pets",
                "description": "Newest last. Filter by tag, and cap the count with limit.",
                "parameters": [
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1}},
                    {"name": "tag", "in": "query", "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": {
                        "description": "The pets",
                        "content": {
                            "application/json": {
                                "schema": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}}
                            }
                        },
                    }
                },
            },
            "post": {
                "operationId": "createPet",
                "summary": "Add a pet to the shop",
                "parameters": [
                    {
                        "name": "X-Owner",
                        "in": "header",
                        "description": "Who brings the pet in.",
                        "schema": {"type": "string"},
                    },
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NewPet"}}},
                },
                "responses": {"201": _json("The new pet", "#/components/schemas/Pet")},
            },
        },
        "/pets/{petId}": {
            "parameters": [_PET_ID],
            "get": {
                "operationId": "showPetById",
                "summary": "Info for one pet",
                "responses": {
                    "200": _json("The pet", "#/components/schemas/Pet"),
                    "404": _json("No such pet", "#/components/schemas/Error"),
                },
            },
            "delete": {  # no operationId: the tool is named from the method and path
                "summary": "Remove a pet from the shop",
                "responses": {"204": {"description": "Removed"}},
            },
        },
        "/pets/{petId}/card": {
            "parameters": [_PET_ID],
            "get": {
                "operationId": "petCard",
                "summary": "The pet's name card, as plain text",
                "responses": {
                    "200": {
                        "description": "A card",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
            },
        },
        "/echo/{value}": {
            "get": {
                "operationId": "echo",
                "summary": "Show exactly what the server received",
                "parameters": [
                    {"name": "value", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "q", "in": "query", "schema": {"type": "string"}},
                    {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
                ],
                "responses": {"200": {"description": "The request as seen by the server"}},
            },
        },
        "/boom": {
            "get": {
                "operationId": "boom",
                "summary": "Always fails with HTTP 500",
                "responses": {
                    "500": {
                        "description": "Failure",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
            },
        },
        "/slow": {
            "get": {
                "operationId": "slow",
                "summary": "Answers after a delay (at most 5 s)",
                "parameters": [
                    {
                        "name": "seconds",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "number", "maximum": 5},
                    }
                ],
                "responses": {"200": {"description": "Done"}},
            },
        },
    },
    "components": {
        "schemas": {
            "Pet": _PET,
            "NewPet": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "tag": {"type": "string"}},
            },
            "Error": _ERROR,
        }
    },
}


class Shop:
    """The pets in memory, and how often the document was fetched."""

    def __init__(self) -> None:
        self.pets: dict[int, dict[str, Any]] = {
            1: {"id": 1, "name": "Rex", "tag": "dog", "owner": None},
            2: {"id": 2, "name": "Tom", "tag": "cat", "owner": None},
        }
        self.next_id = 3
        self.document_fetches = 0


def _not_found(pet_id: int) -> JSONResponse:
    return JSONResponse({"code": 404, "message": f"pet {pet_id} not found"}, status_code=404)


async def openapi(request: Request) -> JSONResponse:
    """The OpenAPI document."""
    request.app.state.shop.document_fetches += 1
    return JSONResponse(OPENAPI)


async def list_pets(request: Request) -> JSONResponse:
    """GET /api/pets?limit=&tag="""
    pets = list(request.app.state.shop.pets.values())
    tag = request.query_params.get("tag")
    if tag is not None:
        pets = [pet for pet in pets if pet["tag"] == tag]
    limit = request.query_params.get("limit")
    return JSONResponse(pets[: int(limit)] if limit else pets)


async def create_pet(request: Request) -> JSONResponse:
    """POST /api/pets with a JSON body and an optional X-Owner header."""
    shop: Shop = request.app.state.shop
    body = await request.json()
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        return JSONResponse({"code": 400, "message": "a pet needs a name"}, status_code=400)
    pet = {
        "id": shop.next_id,
        "name": body["name"],
        "tag": body.get("tag"),
        "owner": request.headers.get("x-owner"),
    }
    shop.pets[shop.next_id] = pet
    shop.next_id += 1
    return JSONResponse(pet, status_code=201)


async def show_pet(request: Request) -> JSONResponse:
    """GET /api/pets/{petId}"""
    pet_id = request.path_params["petId"]
    pet = request.app.state.shop.pets.get(pet_id)
    return JSONResponse(pet) if pet is not None else _not_found(pet_id)


async def delete_pet(request: Request) -> Response:
    """DELETE /api/pets/{petId}"""
    pet_id = request.path_params["petId"]
    if request.app.state.shop.pets.pop(pet_id, None) is None:
        return _not_found(pet_id)
    return Response(status_code=204)


async def pet_card(request: Request) -> Response:
    """GET /api/pets/{petId}/card as text/plain."""
    pet_id = request.path_params["petId"]
    pet = request.app.state.shop.pets.get(pet_id)
    if pet is None:
        return _not_found(pet_id)
    return PlainTextResponse(f"{pet['name']} ({pet['tag'] or 'pet'}) - pet #{pet['id']}")


async def echo(request: Request) -> JSONResponse:
    """GET /api/echo/{value}: the raw path, the query and the headers the server received."""
    return JSONResponse(
        {
            "raw_path": request.scope["raw_path"].decode("latin-1"),
            "value": request.path_params["value"],
            "query": sorted(request.query_params.multi_items()),
            "headers": {key: value for key, value in request.headers.items() if key != "host"},
        }
    )


async def boom(request: Request) -> PlainTextResponse:
    """GET /api/boom: always HTTP 500."""
    return PlainTextResponse("kaboom: the storage backend is down", status_code=500)


async def slow(request: Request) -> JSONResponse:
    """GET /api/slow?seconds=: answers after the delay."""
    seconds = min(float(request.query_params.get("seconds", "1")), 5.0)
    await asyncio.sleep(seconds)
    return JSONResponse({"slept": seconds})


def create_app() -> Starlette:
    """A fresh app with its own in-memory shop."""
    app = Starlette(
        routes=[
            Route("/openapi.json", openapi),
            Route("/api/pets", list_pets, methods=["GET"]),
            Route("/api/pets", create_pet, methods=["POST"]),
            Route("/api/pets/{petId:int}", show_pet, methods=["GET"]),
            Route("/api/pets/{petId:int}", delete_pet, methods=["DELETE"]),
            Route("/api/pets/{petId:int}/card", pet_card, methods=["GET"]),
            Route("/api/echo/{value:path}", echo),
            Route("/api/boom", boom),
            Route("/api/slow", slow),
        ]
    )
    app.state.shop = Shop()
    return app


def main(argv: list[str] | None = None) -> None:
    """Serve the shop on 127.0.0.1."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    uvicorn.run(create_app(), host=args.host, port=args.port, log_level="info")


if __name__ == "__main__":
    main()
