/**
 * The interactive API reference at /api/docs: Swagger UI over the OpenAPI document the server
 * generates from its route table (/api/openapi.json). Everything comes from this server: the
 * renderer is bundled at build time, and the validator badge (which would call an outside
 * service) is off. Requests made with "Try it out" carry the session cookie of the dashboard.
 */
import SwaggerUIBundle from 'swagger-ui-dist/swagger-ui-bundle.js';
import 'swagger-ui-dist/swagger-ui.css';
import './api-docs.css';

SwaggerUIBundle({
  url: '/api/openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: 'BaseLayout',
  withCredentials: true,
  displayRequestDuration: true,
  filter: true,
});
