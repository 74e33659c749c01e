/** The parts of swagger-ui-dist's prebuilt bundle the API reference page uses (the package ships no types). */
declare module 'swagger-ui-dist/swagger-ui-bundle.js' {
  interface SwaggerUIOptions {
    url: string;
    dom_id: string;
    deepLinking?: boolean;
    validatorUrl?: string | null;
    presets?: unknown[];
    layout?: string;
    withCredentials?: boolean;
    tryItOutEnabled?: boolean;
    displayRequestDuration?: boolean;
    filter?: boolean;
    docExpansion?: 'list' | 'full' | 'none';
  }
  interface SwaggerUIBundle {
    (options: SwaggerUIOptions): unknown;
    presets: { apis: unknown };
  }
  const bundle: SwaggerUIBundle;
  export default bundle;
}
